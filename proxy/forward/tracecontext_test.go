package forward

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const callerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestTraceContextReplaced: with a propagator (tracing on) the upstream
// gets exactly one traceparent, the attempt span's, and the caller's
// tracestate only through it; without one (tracing off) the caller's
// fields pass unchanged, like any other field.
func TestTraceContextReplaced(t *testing.T) {
	srv, rc := newBackend(t, nil)
	ep := newEndpoint(t, "traced", srv.URL)
	req := get("/")
	req.Header = http.Header{"Traceparent": {callerTraceparent}, "Tracestate": {"caller=1"}}

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f := newForwarder(t, Options{Propagator: propagation.TraceContext{}})
	ctx, span := tp.Tracer("test").Start(context.Background(), "attempt")
	defer span.End()
	if a := f.Do(ctx, ep, req); a.Err != nil {
		t.Fatal(a.Err)
	}
	got := rc.only(t).Header
	sc := trace.SpanContextFromContext(ctx)
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if v := got.Values("Traceparent"); len(v) != 1 || v[0] != want {
		t.Errorf("traceparent = %q, want only %q", v, want)
	}
	if v := got.Values("Tracestate"); len(v) != 0 {
		t.Errorf("tracestate = %q: the caller's must not pass beside the attempt's context", v)
	}
	if req.Header.Get("Traceparent") != callerTraceparent {
		t.Error("the caller's stored header was changed")
	}

	srv2, rc2 := newBackend(t, nil)
	off := newForwarder(t, Options{})
	if a := off.Do(ctx, newEndpoint(t, "untraced", srv2.URL), req); a.Err != nil {
		t.Fatal(a.Err)
	}
	if h := rc2.only(t).Header; h.Get("Traceparent") != callerTraceparent || h.Get("Tracestate") != "caller=1" {
		t.Errorf("tracing off: traceparent %q tracestate %q, want the caller's", h.Get("Traceparent"), h.Get("Tracestate"))
	}
}
