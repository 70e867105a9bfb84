package forward

import (
	"context"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// LogAttempt writes the log line of an upstream attempt as access
// (config.Log.Access) says — every attempt (all, the default of Load),
// those whose outcome is not success (errors, and "" for a Config built
// without Load), or none — the same at the same level (info) with the same fields
// whether the callout listener or the dispatcher made it, so one query
// finds every attempt: msg "attempt", endpoint, callout_id ("" for a read
// that has no record), attempt (its number, 1-based), kind (first, retry,
// probe, replay), status (the upstream's, 0 when it did not answer),
// outcome and reason (policy.Classify's, contract §2), duration_ms, error
// (Attempt.Err's text, which never holds the URL or a credential; "" when
// the upstream answered), then extra (the trace_id of a traced attempt;
// an empty slog.Attr is left out). The line is built only when it is
// written, so a success under the default costs the log nothing; it goes
// to l's handler directly, without slog's caller lookup (Logger.LogAttrs
// calls runtime.Callers on every line, for a source nobody configured: no
// handler here sets AddSource), so its Record has no PC. Bodies and header
// values are never logged.
func LogAttempt(ctx context.Context, l *slog.Logger, access, endpoint, calloutID string, n int, kind policy.Kind,
	att Attempt, cls policy.Classification, extra ...slog.Attr) {
	switch access {
	case config.LogAccessNone:
		return
	case config.LogAccessAll:
	default: // errors, and a Config built without Load
		if cls.Outcome == policy.Success {
			return
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	h := l.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	status, errText := 0, ""
	if att.Response != nil {
		status = att.Response.Status
	}
	if att.Err != nil {
		errText = att.Err.Error()
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "attempt", 0)
	r.AddAttrs(slog.String("endpoint", endpoint), slog.String("callout_id", calloutID), slog.Int("attempt", n),
		slog.String("kind", string(kind)), slog.Int("status", status), slog.String("outcome", string(cls.Outcome)),
		slog.String("reason", cls.Reason), slog.Int64("duration_ms", att.Duration.Milliseconds()),
		slog.String("error", errText))
	r.AddAttrs(extra...)
	_ = h.Handle(ctx, r)
}
