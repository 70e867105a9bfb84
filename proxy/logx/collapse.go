package logx

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// maxTracked bounds the distinct lines a Collapser remembers per
// interval; past it, new lines are written as they come (never dropped).
const maxTracked = 1000

// Collapser is a slog.Handler that writes the first of identical
// warnings and errors (same level, message and attributes, the time aside:
// e.g. "claim failed" for every endpoint round while Redis is down) and
// counts the rest for CollapseInterval; when the interval is over, one
// line, the same record with "repeated": N and "repeated_within": the
// interval, says how many were left out. Info and debug lines pass
// through. It is safe for concurrent use; its clones (WithAttrs,
// WithGroup) share its memory.
type Collapser struct {
	next     slog.Handler
	prefix   string // the attributes and groups this clone adds, for the key
	interval time.Duration
	now      func() time.Time
	st       *collapseState
}

// collapseState is what every clone of one Collapser shares.
type collapseState struct {
	mu   sync.Mutex
	seen map[string]*seenLine
}

// seenLine is one distinct line within its interval.
type seenLine struct {
	first   time.Time
	skipped int
	rec     slog.Record  // the first occurrence, to repeat in the summary
	h       slog.Handler // the handler (clone) that wrote it
}

// NewCollapser collapses repeated lines written through next within
// interval, on clock now (time.Now when nil).
func NewCollapser(next slog.Handler, interval time.Duration, now func() time.Time) *Collapser {
	if now == nil {
		now = time.Now
	}
	return &Collapser{next: next, interval: interval, now: now,
		st: &collapseState{seen: map[string]*seenLine{}}}
}

// Enabled reports whether next writes level.
func (c *Collapser) Enabled(ctx context.Context, level slog.Level) bool {
	return c.next.Enabled(ctx, level)
}

// Handle writes r, or counts it when an identical warning or error was
// written less than the interval ago.
func (c *Collapser) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return c.next.Handle(ctx, r)
	}
	key := c.key(r)
	now := c.now()
	c.st.mu.Lock()
	s := c.st.seen[key]
	var summary *seenLine
	switch {
	case s != nil && now.Sub(s.first) < c.interval:
		s.skipped++
		c.st.mu.Unlock()
		return nil
	case s != nil && s.skipped > 0:
		summary = s
	}
	if s != nil || len(c.st.seen) < maxTracked {
		c.st.seen[key] = &seenLine{first: now, rec: r.Clone(), h: c.next}
	}
	c.st.mu.Unlock()
	if summary != nil {
		if err := summary.h.Handle(ctx, c.summaryOf(summary, now)); err != nil {
			return err
		}
	}
	return c.next.Handle(ctx, r)
}

// Flush writes the count of every line left out whose interval is over
// (all of them when final, at exit) and forgets lines that were not
// repeated. Run calls it every interval.
func (c *Collapser) Flush(ctx context.Context, final bool) {
	now := c.now()
	c.st.mu.Lock()
	var due []*seenLine
	for k, s := range c.st.seen {
		if !final && now.Sub(s.first) < c.interval {
			continue
		}
		if s.skipped > 0 {
			due = append(due, s)
		}
		delete(c.st.seen, k)
	}
	c.st.mu.Unlock()
	for _, s := range due {
		_ = s.h.Handle(ctx, c.summaryOf(s, now))
	}
}

// Run calls Flush every interval until ctx ends, then once more for
// everything (the counts of the last interval are not lost at exit).
func (c *Collapser) Run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.Flush(context.WithoutCancel(ctx), true)
			return
		case <-t.C:
			c.Flush(ctx, false)
		}
	}
}

// summaryOf is s's first record again, at now, with how many identical
// ones were left out.
func (c *Collapser) summaryOf(s *seenLine, now time.Time) slog.Record {
	r := slog.NewRecord(now, s.rec.Level, s.rec.Message, s.rec.PC)
	s.rec.Attrs(func(a slog.Attr) bool { r.AddAttrs(a); return true })
	r.AddAttrs(slog.Int("repeated", s.skipped), slog.String("repeated_within", c.interval.String()))
	return r
}

// key identifies a line: this clone's attributes, the level, the message
// and the record's attributes.
func (c *Collapser) key(r slog.Record) string {
	var b strings.Builder
	b.WriteString(c.prefix)
	b.WriteString(r.Level.String())
	b.WriteByte(0)
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "\x00%s=%v", a.Key, a.Value)
		return true
	})
	return b.String()
}

// WithAttrs returns a clone adding attrs, sharing c's memory.
func (c *Collapser) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *c
	n.next = c.next.WithAttrs(attrs)
	var b strings.Builder
	b.WriteString(c.prefix)
	for _, a := range attrs {
		fmt.Fprintf(&b, "%s=%v\x00", a.Key, a.Value)
	}
	n.prefix = b.String()
	return &n
}

// WithGroup returns a clone opening group name, sharing c's memory.
func (c *Collapser) WithGroup(name string) slog.Handler {
	n := *c
	n.next = c.next.WithGroup(name)
	n.prefix = c.prefix + "[" + name + "]\x00"
	return &n
}
