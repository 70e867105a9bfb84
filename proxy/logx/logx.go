// Package logx builds the proxy's logger (log/slog): JSON or text lines at
// the configured level, durations written as Go duration strings ("20s",
// not 20000000000 nanoseconds), repeated identical warnings and errors
// collapsed into one line per interval with a count (Collapser), every
// line about a callout carrying its callout_id and the caller's trace_id
// from the context (WithCallout, FromHeader, context.go), and the adapter
// that routes go-redis's own log lines into it (RedisLogger).
package logx

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Options configure New. The zero value writes JSON at info, collapsing
// nothing.
type Options struct {
	// Format is "json" (default) or "text".
	Format string
	// Level is the least level written.
	Level slog.Level
	// CollapseInterval, when positive, collapses repeated identical
	// warnings and errors (Collapser).
	CollapseInterval time.Duration
	// Now is the clock of the collapsing; default time.Now.
	Now func() time.Time
}

// New returns a logger writing to w as o says — each line logged with a
// context that carries a callout id or a trace context gets callout_id and
// trace_id (context.go) — and its Collapser (nil when o.CollapseInterval is
// 0), whose Run the caller starts and whose Flush it calls before exiting.
func New(w io.Writer, o Options) (*slog.Logger, *Collapser) {
	ho := &slog.HandlerOptions{Level: o.Level, ReplaceAttr: durations}
	var h slog.Handler = slog.NewJSONHandler(w, ho)
	if o.Format == "text" {
		h = slog.NewTextHandler(w, ho)
	}
	if o.CollapseInterval <= 0 {
		return slog.New(&contextHandler{next: h}), nil
	}
	c := NewCollapser(h, o.CollapseInterval, o.Now)
	return slog.New(&contextHandler{next: c}), c
}

// durations writes every time.Duration attribute as its String form: a
// JSON handler would otherwise write nanoseconds as a number.
func durations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// RedisLogger routes go-redis's own log lines (reconnects, pool and
// cluster-topology trouble, which it writes with the standard log package
// by default) into a slog.Logger, so every line the proxy writes is in one
// format. It implements go-redis's internal.Logging interface; give it to
// redis.SetLogger.
type RedisLogger struct {
	Logger *slog.Logger
}

// Printf writes one go-redis line as a warning with component "go-redis":
// the library logs only what went wrong.
func (r RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.Logger.LogAttrs(ctx, slog.LevelWarn, fmt.Sprintf(format, v...), slog.String("component", "go-redis"))
}
