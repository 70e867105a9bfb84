package tracing_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
)

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerParent = "00-" + callerTrace + "-00f067aa0ba902b7-01"
)

// recorder returns a Tracer whose spans sr records, sampling everything.
func recorder(t *testing.T) (*tracing.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	tp, sr := tracingtest.Recorder(t, 1)
	return tracing.New(tp, propagation.TraceContext{}), sr
}

// TestOffIsNil: no provider or a no-op one is tracing off, and every
// method of the nil Tracer does nothing.
func TestOffIsNil(t *testing.T) {
	if tracing.New(nil, nil) != nil || tracing.New(noop.NewTracerProvider(), nil) != nil {
		t.Fatal("a nil or no-op provider must give a nil Tracer")
	}
	var tr *tracing.Tracer
	ctx := context.Background()
	h := http.Header{"Traceparent": {callerParent}}
	if tr.Extract(ctx, h) != ctx || tr.StartAdmission(ctx, h, "GET") != ctx || tr.Resume(ctx, callerParent) != ctx {
		t.Error("a nil Tracer changed the context")
	}
	if tr.Encode(ctx) != "" || !tr.LogAttr(ctx).Equal(slog.Attr{}) || tr.Propagator() != nil {
		t.Error("a nil Tracer encoded, logged or propagated something")
	}
	c, s := tr.StartAttempt(ctx, tracing.AttemptStart{})
	s.EndAttempt(tracing.AttemptEnd{})
	tr.Admitted(ctx, tracing.Admission{})
	tr.EndServer(ctx, http.StatusOK)
	if c != ctx || s != nil {
		t.Error("a nil Tracer started an attempt span")
	}
}

// TestExtract: the caller's traceparent becomes the admission span's
// parent (W3C Trace Context §3.2); an invalid one, or two fields, start a
// new trace.
func TestExtract(t *testing.T) {
	tr, sr := recorder(t)
	for _, tt := range []struct {
		name   string
		h      http.Header
		joined bool
	}{
		{"valid", http.Header{"Traceparent": {callerParent}}, true},
		{"upper-case hex is invalid (§3.2.2.3)", http.Header{"Traceparent": {strings.ToUpper(callerParent)}}, false},
		{"all-zero trace id", http.Header{"Traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, false},
		{"two fields", http.Header{"Traceparent": {callerParent, callerParent}}, false},
		{"none", http.Header{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tr.StartAdmission(context.Background(), tt.h, "POST")
			tr.Admitted(ctx, tracing.Admission{Result: tracing.AdmitAttempt})
			tr.EndServer(ctx, http.StatusOK)
			spans := sr.Ended()
			s := spans[len(spans)-1]
			if got := s.SpanContext().TraceID().String() == callerTrace; got != tt.joined {
				t.Errorf("joined the caller's trace = %v, want %v", got, tt.joined)
			}
			if tt.joined && (s.Parent().SpanID().String() != "00f067aa0ba902b7" || !s.Parent().IsRemote()) {
				t.Errorf("parent = %v, want the caller's remote span", s.Parent())
			}
			if !s.SpanContext().IsValid() {
				t.Error("no trace started")
			}
		})
	}
}

// TestEncodeResume: the stored form is traceparent[,tracestate], and a
// span started from Resume is a child of the stored span in the same
// trace, keeping the sampled flag and the tracestate.
func TestEncodeResume(t *testing.T) {
	tr, sr := recorder(t)
	h := http.Header{"Traceparent": {callerParent}, "Tracestate": {"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}}
	ctx := tr.StartAdmission(context.Background(), h, "POST")
	stored := tr.Encode(ctx)
	adm := trace.SpanContextFromContext(ctx)
	want := "00-" + callerTrace + "-" + adm.SpanID().String() + "-01,congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	if stored != want {
		t.Fatalf("stored = %q, want %q", stored, want)
	}
	later, s := tr.StartAttempt(tr.Resume(context.Background(), stored), tracing.AttemptStart{Mode: tracing.ModeDispatched})
	s.EndAttempt(tracing.AttemptEnd{Outcome: "success"})
	got := sr.Ended()[0]
	if got.SpanContext().TraceID() != adm.TraceID() || got.Parent().SpanID() != adm.SpanID() {
		t.Errorf("resumed span %v has parent %v, want trace %s parent %s", got.SpanContext(), got.Parent(),
			adm.TraceID(), adm.SpanID())
	}
	if ts := trace.SpanContextFromContext(later).TraceState().String(); ts != "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" {
		t.Errorf("tracestate = %q", ts)
	}
	if tr.Resume(context.Background(), "garbage") != context.Background() {
		t.Error("an invalid stored context was resumed")
	}
	if got := tr.LogAttr(later); got.Key != "trace_id" || got.Value.String() != callerTrace {
		t.Errorf("LogAttr = %v", got)
	}
	if !tr.LogAttr(context.Background()).Equal(slog.Attr{}) {
		t.Error("LogAttr of an untraced context is not empty")
	}
}

// TestShortTraceState: a tracestate over MaxTraceState bytes loses its
// members over 128 characters first, then members from the end (W3C
// Trace Context §3.3.1.5), and keeps the order of the rest.
func TestShortTraceState(t *testing.T) {
	var members []string
	members = append(members, "big="+strings.Repeat("x", 200))
	for i := range 30 {
		members = append(members, fmt.Sprintf("v%02d=%s", i, strings.Repeat("y", 20)))
	}
	ts, err := trace.ParseTraceState(strings.Join(members, ","))
	if err != nil {
		t.Fatal(err)
	}
	short := tracing.ShortTraceState(ts)
	s := short.String()
	if len(s) > tracing.MaxTraceState || strings.Contains(s, "big=") || !strings.HasPrefix(s, "v00=") {
		t.Fatalf("short = %q (%d bytes)", s, len(s))
	}
	// 24 bytes a member plus its comma: ten fit in 256 (10·25−1 = 249).
	if short.Len() != 10 || short.Get("v09") == "" || short.Get("v10") != "" {
		t.Errorf("kept %d members: %q", short.Len(), s)
	}
	tr, _ := recorder(t)
	ctx := tr.Extract(context.Background(), http.Header{"Traceparent": {callerParent},
		"Tracestate": {strings.Join(members, ",")}})
	if got := trace.SpanContextFromContext(ctx).TraceState().String(); got != s {
		t.Errorf("extracted tracestate = %q, want %q", got, s)
	}
}
