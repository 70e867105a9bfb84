package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
)

// TestAttemptSpan: an attempt's span carries its endpoint, number, kind,
// mode, status, outcome, action, state and the Retry-After the policy
// used (capped at retry_after_cap), is a client span and an error unless
// the attempt succeeded; every key is among tracing.Keys.
func TestAttemptSpan(t *testing.T) {
	tr, sr := recorder(t)
	clk := clocktest.New(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	p := policy.Defaults()
	resp := &policy.Response{Status: 503, Header: http.Header{"Retry-After": {"7200"}}}
	comp := policy.Completion{Action: policy.ActionRetry, NextAttemptAt: clk.Now().Add(time.Hour)}
	end := tracing.Decided(policy.AttemptResult{Response: resp}, policy.Classification{Outcome: policy.Retryable,
		Reason: policy.ReasonStatus5xx}, comp, p, clk.Now())
	end.State = policy.Scheduled

	ctx := tr.StartAdmission(context.Background(), http.Header{}, "POST")
	upstream, _ := url.Parse("https://api.example.com/v2")
	_, s := tr.StartAttempt(ctx, tracing.AttemptStart{Endpoint: "payment-api", Upstream: upstream,
		CalloutID: "c1", Method: "POST", N: 2, Kind: policy.KindRetry, Mode: tracing.ModeDispatched})
	s.EndAttempt(end)
	got := sr.Ended()[0]
	a := tracingtest.Attrs(got)
	want := map[attribute.Key]any{
		"callout.endpoint": "payment-api", "server.address": "api.example.com", "server.port": int64(443), "callout.id": "c1",
		"http.request.method": "POST", "callout.attempt": int64(2), "callout.attempt.kind": "retry",
		"callout.attempt.mode": "dispatched", "http.response.status_code": int64(503),
		"callout.outcome": "retryable", "callout.reason": "status_5xx", "callout.action": "retry",
		"callout.state": "scheduled", "callout.retry_after_ms": int64(3600_000),
		"callout.next_attempt_in_ms": int64(3600_000),
	}
	for k, v := range want {
		if a[k].AsInterface() != v {
			t.Errorf("%s = %v, want %v", k, a[k].AsInterface(), v)
		}
	}
	if got.SpanKind() != trace.SpanKindClient || got.Status().Code != codes.Error || got.Status().Description != "status_5xx" {
		t.Errorf("kind %v status %+v, want client, error status_5xx", got.SpanKind(), got.Status())
	}
	if got.Name() != tracing.SpanAttempt || got.Parent().SpanID() != trace.SpanContextFromContext(ctx).SpanID() {
		t.Errorf("name %q parent %v: want a callout.attempt child of the admission", got.Name(), got.Parent())
	}
	tracingtest.KeysKnown(t, sr.Ended())

	// A success is no error and records no Retry-After it did not get.
	_, s = tr.StartAttempt(ctx, tracing.AttemptStart{Mode: tracing.ModeSynchronous, Method: "BREW"})
	s.EndAttempt(tracing.Decided(policy.AttemptResult{Response: &policy.Response{Status: 200}},
		policy.Classification{Outcome: policy.Success}, policy.Completion{Action: policy.ActionSucceed}, p, clk.Now()))
	ok := sr.Ended()[1]
	if a := tracingtest.Attrs(ok); ok.Status().Code != codes.Unset || a["callout.retry_after_ms"].Type() != attribute.INVALID ||
		a["http.request.method"].AsString() != "_OTHER" {
		t.Errorf("success span: status %+v, attributes %v", ok.Status(), a)
	}
}

// TestAdmissionSpan: the server span ends with the answer, whatever it
// is, carrying its status: a success is no error, a 4xx refusal is the
// caller's (no error), a 5xx one the proxy's (error, described by its
// problem code); the first admission recorded is kept; the span is a
// server span on the route template.
func TestAdmissionSpan(t *testing.T) {
	tr, sr := recorder(t)
	for _, tt := range []struct {
		result  tracing.AdmissionResult
		problem string
		status  int
	}{
		{tracing.AdmitAttempt, "", 200},
		{tracing.AdmitRejected, "auth-failed", 401},
		{tracing.AdmitRejected, "store-unavailable", 503},
		{tracing.AdmitAttempt, "", 0}, // nothing written: net/http answers 200
	} {
		ctx := tr.StartAdmission(context.Background(), http.Header{}, "GET")
		tr.Admitted(ctx, tracing.Admission{Result: tt.result, Endpoint: "payment-api", Problem: tt.problem})
		tr.Admitted(ctx, tracing.Admission{Result: tracing.AdmitDuplicate}) // ignored: recorded already
		tr.EndServer(ctx, tt.status)
		tr.EndServer(ctx, 500) // ignored: ended
	}
	spans := sr.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for i, want := range []struct {
		code   codes.Code
		desc   string
		status int64
		result string
	}{{codes.Unset, "", 200, "attempt"}, {codes.Unset, "", 401, "rejected"},
		{codes.Error, "store-unavailable", 503, "rejected"}, {codes.Unset, "", 200, "attempt"}} {
		s := spans[i]
		a := tracingtest.Attrs(s)
		if s.Status().Code != want.code || s.Status().Description != want.desc || s.SpanKind() != trace.SpanKindServer ||
			a["http.route"].AsString() != tracing.Route || a["callout.admission"].AsString() != want.result ||
			a["http.response.status_code"].AsInt64() != want.status {
			t.Errorf("span %d: status %v kind %v attributes %v, want %+v", i, s.Status(), s.SpanKind(), a, want)
		}
	}
	tracingtest.KeysKnown(t, spans)
}

// TestSampler: parent-based with the ratio for roots and for callers
// that did not sample (Apex's flags 00); a caller's sampled trace is
// always recorded, at ratio 0 too.
func TestSampler(t *testing.T) {
	for _, tt := range []struct {
		ratio    float64
		parent   string
		recorded bool
	}{
		{0, "", false},
		{0, "00-" + callerTrace + "-00f067aa0ba902b7-00", false},
		{0, callerParent, true},
		{1, "", true},
		{1, "00-" + callerTrace + "-00f067aa0ba902b7-00", true},
	} {
		tp, sr := tracingtest.Recorder(t, tt.ratio)
		tr := tracing.New(tp, nil)
		h := http.Header{}
		if tt.parent != "" {
			h.Set("Traceparent", tt.parent)
		}
		ctx := tr.StartAdmission(context.Background(), h, "POST")
		stored := tr.Encode(ctx)
		tr.Admitted(ctx, tracing.Admission{Result: tracing.AdmitScheduled})
		tr.EndServer(ctx, http.StatusAccepted)
		// The dispatcher, later: the same decision from the stored flags.
		_, s := tr.StartAttempt(tr.Resume(context.Background(), stored), tracing.AttemptStart{})
		s.EndAttempt(tracing.AttemptEnd{Outcome: policy.Success})
		if got := len(sr.Ended()); got != map[bool]int{true: 2, false: 0}[tt.recorded] {
			t.Errorf("ratio %v parent %q: %d spans recorded, want recorded=%v", tt.ratio, tt.parent, got, tt.recorded)
		}
		if stored == "" {
			t.Errorf("ratio %v parent %q: nothing stored: the upstream and the dispatcher need the trace id", tt.ratio, tt.parent)
		}
		_ = tp.Shutdown(context.Background())
	}
}

// TestReplayAndBatchSpans: a replay's span is a child of the dead
// letter's stored context; a write batch is a root span with its counts.
func TestReplayAndBatchSpans(t *testing.T) {
	tr, sr := recorder(t)
	stored := callerParent
	ctx, s := tr.StartReplay(context.Background(), stored, "dl1", "payment-api")
	chain := tr.Encode(ctx)
	s.EndReplay("replayed", "c2")
	_, b := tr.StartBatch(ctx, 3)
	b.EndBatch(tracing.Batch{Records: 2, Events: 1, Calls: 1, Done: 3})
	spans := sr.Ended()
	if r := spans[0]; r.SpanContext().TraceID().String() != callerTrace || r.Parent().SpanID().String() != "00f067aa0ba902b7" ||
		!strings.HasPrefix(chain, "00-"+callerTrace+"-"+r.SpanContext().SpanID().String()) {
		t.Errorf("replay span %v parent %v, chain context %q", r.SpanContext(), r.Parent(), chain)
	}
	if bs := spans[1]; bs.Parent().IsValid() || tracingtest.Attrs(bs)["salesforce.records"].AsInt64() != 2 ||
		tracingtest.Attrs(bs)["salesforce.outbox_entries"].AsInt64() != 3 {
		t.Errorf("batch span parent %v attributes %v, want a root with its counts", bs.Parent(), tracingtest.Attrs(bs))
	}
	tracingtest.KeysKnown(t, spans)
}

// TestExportFailuresLogged: export failures reach the proxy's log at a
// rate (the first at once, then one a minute with a count), and the SDK
// is told nothing failed, so its global handler prints nothing.
func TestExportFailuresLogged(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	clk := clocktest.New(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	exp := tracing.NewLoggingExporter(failingExporter{}, logger, clk.Now)
	for range 3 {
		if err := exp.ExportSpans(context.Background(), nil); err != nil {
			t.Fatalf("ExportSpans = %v, want nil", err)
		}
	}
	clk.Advance(time.Minute)
	_ = exp.ExportSpans(context.Background(), nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"batches":1`) || !strings.Contains(lines[1], `"batches":3`) {
		t.Errorf("log lines:\n%s", buf.String())
	}
}

type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector unreachable")
}
func (failingExporter) Shutdown(context.Context) error { return nil }
