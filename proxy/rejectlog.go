package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rejectionLogWindow is how often a repeated rejection is summarised.
const rejectionLogWindow = time.Minute

// rejectionKey groups rejections for the log: by endpoint ("" when none is
// known, so caller-chosen names cannot grow the map) and problem code.
type rejectionKey struct{ endpoint, code string }

// rejectionCount is what was suppressed for one key in the current window.
type rejectionCount struct {
	since time.Time   // start of the current window
	n     int         // rejections suppressed since then
	level slog.Level  // of the last one
	last  []slog.Attr // the last one's attributes
}

// rejectionLog samples the "rejected" log records: the first
// rejection of each (endpoint, code) is logged at once with its detail;
// later ones within the same minute are only counted, and one record per
// minute — "rejected (repeated)" with `count` and the last one's
// attributes — says how many there were. A flood of bad tokens or oversize
// bodies costs a line a minute, not a line each; callout_rejected_total
// still counts every one. Safe for concurrent use.
type rejectionLog struct {
	logger *slog.Logger
	now    func() time.Time
	window time.Duration

	mu   sync.Mutex
	seen map[rejectionKey]*rejectionCount
}

func newRejectionLog(logger *slog.Logger, now func() time.Time) *rejectionLog {
	return &rejectionLog{logger: logger, now: now, window: rejectionLogWindow, seen: map[rejectionKey]*rejectionCount{}}
}

// log records one rejection, logging it when it is the first of its key in
// the window.
func (l *rejectionLog) log(ctx context.Context, level slog.Level, k rejectionKey, attrs []slog.Attr) {
	now := l.now()
	l.mu.Lock()
	c, ok := l.seen[k]
	if ok && now.Sub(c.since) < l.window {
		c.n++
		c.level, c.last = level, attrs
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if ok {
		suppressed = c.n
	}
	l.seen[k] = &rejectionCount{since: now}
	l.mu.Unlock()
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("repeated", suppressed))
	}
	l.logger.LogAttrs(ctx, level, "rejected", attrs...)
}

// flush logs the count of every key whose window has ended with
// suppressed rejections, and forgets keys quiet for a whole window.
func (l *rejectionLog) flush(ctx context.Context) { l.flushEnded(ctx, false) }

// flushEnded is flush; with all, every suppressed count is logged whether
// its window ended or not, with the time it covers ("window").
func (l *rejectionLog) flushEnded(ctx context.Context, all bool) {
	now := l.now()
	type summary struct {
		level slog.Level
		attrs []slog.Attr
	}
	var out []summary
	l.mu.Lock()
	for k, c := range l.seen {
		switch {
		case !all && now.Sub(c.since) < l.window:
		case c.n == 0:
			delete(l.seen, k)
		default:
			out = append(out, summary{c.level, append(c.last, slog.Int("count", c.n),
				slog.Duration("window", now.Sub(c.since)))})
			c.since, c.n, c.last = now, 0, nil
		}
	}
	l.mu.Unlock()
	for _, s := range out {
		l.logger.LogAttrs(ctx, s.level, "rejected (repeated)", s.attrs...)
	}
}

// Run writes the per-minute counts of repeated rejections until ctx ends,
// then flushes once more. serve starts it beside the listeners.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.rejections.window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.rejections.flushAll(context.WithoutCancel(ctx))
			return
		case <-t.C:
			s.rejections.flush(ctx)
		}
	}
}

// flushAll logs every suppressed count, whether its window ended or not.
func (l *rejectionLog) flushAll(ctx context.Context) { l.flushEnded(ctx, true) }
