package proxy

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// TestCalloutLogLinesCarryTraceAndID: every log line about a callout —
// its synchronous attempt, the dispatcher's retry an hour later, the dead
// letter it became — carries its callout_id and the trace_id of the
// caller's traceparent, with tracing off (no exporter: the proxy keeps the
// caller's trace context with the callout) and on (contract §12).
func TestCalloutLogLinesCarryTraceAndID(t *testing.T) {
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, traced := range []bool{false, true} {
		name := map[bool]string{false: "tracing off", true: "tracing on"}[traced]
		t.Run(name, func(t *testing.T) {
			logs := &proctest.LogBuffer{}
			rig := &clockRig{}
			spec := rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusServiceUnavailable)
			}, extra: "policy:\n  max_attempts: 2\nlog:\n  access: all\n", logs: logs}
			if traced {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()),
					sdktrace.WithSampler(tracing.Sampler(1)))
				t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				spec.tp, spec.prop = tp, propagation.TraceContext{}
			}
			rig.build(t, spec)
			hdr := http.Header{"Idempotency-Key": {`"trace-1"`},
				"Traceparent": {"00-" + callerTrace + "-00f067aa0ba902b7-01"}}
			first := rig.do(t, http.MethodPost, "/callout/api/charges", hdr, `{}`)
			id := first.Header().Get("Callout-Id")
			if first.Code != http.StatusAccepted || id == "" {
				t.Fatalf("first: %d %s, want 202", first.Code, first.Body)
			}
			rig.clock.Advance(time.Hour)
			if n := rig.disp.Round(context.Background()); n != 1 {
				t.Fatalf("dispatcher claimed %d, want 1", n)
			}
			rig.disp.Wait()
			// A repeat of the dead letter's key is refused about that
			// callout: its line names it too.
			if again := rig.do(t, http.MethodPost, "/callout/api/charges", hdr, `{}`); again.Code != http.StatusConflict {
				t.Fatalf("repeat of a dead letter's key: %d %s, want 409", again.Code, again.Body)
			}
			msgs := map[string]int{}
			for _, line := range logs.Lines(t) {
				if line["callout_id"] != id {
					continue
				}
				msgs[line["msg"].(string)]++
				if line["trace_id"] != callerTrace {
					t.Errorf("line %v: trace_id %v, want the caller's %s", line, line["trace_id"], callerTrace)
				}
			}
			if msgs["attempt"] != 2 || msgs["dead letter"] != 1 || msgs["rejected"] != 1 {
				t.Errorf("lines about %s: %v, want 2 attempt, 1 dead letter and 1 rejected:\n%s", id, msgs, logs.String())
			}
		})
	}
}
