package forward

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// records keeps every Record its handler is given.
type records struct {
	slog.Handler
	got []slog.Record
}

func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.got = append(h.got, r.Clone())
	return nil
}

// TestLogAttemptNoCallerLookup: the attempt line goes to the handler
// without slog's caller lookup (its Record has no PC: Logger.LogAttrs
// would call runtime.Callers for it), with its message, level and fields;
// a disabled level writes nothing.
func TestLogAttemptNoCallerLookup(t *testing.T) {
	h := &records{Handler: slog.DiscardHandler}
	l := slog.New(&enabled{h, slog.LevelInfo})
	att := Attempt{Response: &Response{Status: http.StatusCreated}, Duration: 12 * time.Millisecond}
	cls := policy.Classification{Outcome: policy.Success, Reason: "2xx"}
	LogAttempt(context.Background(), l, config.LogAccessAll, "orders", "c1", 1, policy.KindFirst, att, cls,
		slog.String("trace_id", "t1"), slog.Attr{})
	if len(h.got) != 1 {
		t.Fatalf("%d lines, want 1", len(h.got))
	}
	r := h.got[0]
	if r.PC != 0 {
		t.Errorf("the line's PC = %#x, want 0 (no runtime.Callers)", r.PC)
	}
	if r.Message != "attempt" || r.Level != slog.LevelInfo {
		t.Errorf("line %q at %s, want attempt at INFO", r.Message, r.Level)
	}
	fields := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { fields[a.Key] = a.Value.String(); return true })
	for k, v := range map[string]string{"endpoint": "orders", "callout_id": "c1", "attempt": "1", "kind": "first",
		"status": "201", "outcome": "success", "reason": "2xx", "duration_ms": "12", "error": "", "trace_id": "t1"} {
		if fields[k] != v {
			t.Errorf("%s = %q, want %q", k, fields[k], v)
		}
	}
	quiet := slog.New(&enabled{h, slog.LevelWarn})
	LogAttempt(context.Background(), quiet, config.LogAccessAll, "orders", "c1", 1, policy.KindFirst, att, cls)
	if len(h.got) != 1 {
		t.Errorf("a disabled level wrote a line")
	}
}

// enabled is h enabled from min.
type enabled struct {
	*records
	min slog.Level
}

func (e *enabled) Enabled(_ context.Context, l slog.Level) bool { return l >= e.min }
