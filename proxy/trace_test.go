package proxy

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
)

// The caller's trace context in the tests: Apex's form, not sampled (00).
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-00"
)

// Secrets of traceRig's requests that no span attribute may carry.
const (
	rigUpstreamKey = "upstream-secret-value-42"
	rigCardToken   = "tok_card_secret_77"
	rigQuerySecret = "query-secret-99"
	rigCardNumber  = "4111111111111111"
)

// traceRig is the ingress and a dispatcher in process (as clockRig) with
// tracing on, its spans recorded by the SDK's tracetest recorder, its logs
// kept, and an upstream that answers statuses in turn and records the
// traceparent of every request.
type traceRig struct {
	clockRig
	spans *tracetest.SpanRecorder
	logs  *proctest.LogBuffer

	mu       sync.Mutex
	statuses []int
	parents  []string // traceparent fields of each upstream request, joined by "|"
	states   []string // tracestate fields of each, joined by "|"
}

func newTraceRig(t *testing.T, statuses ...int) *traceRig {
	t.Helper()
	rig := &traceRig{statuses: statuses, logs: &proctest.LogBuffer{}}
	tp, spans := tracingtest.Recorder(t, 1)
	rig.spans = spans
	rig.build(t, rigSpec{
		upstream: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			rig.mu.Lock()
			rig.parents = append(rig.parents, strings.Join(r.Header.Values("Traceparent"), "|"))
			rig.states = append(rig.states, strings.Join(r.Header.Values("Tracestate"), "|"))
			status := http.StatusOK
			if len(rig.statuses) > 0 {
				status, rig.statuses = rig.statuses[0], rig.statuses[1:]
			}
			rig.mu.Unlock()
			w.WriteHeader(status)
		},
		path: "/base",
		extra: `    headers:
      X-Api-Key: {env: RIG_UPSTREAM_KEY}
    redact: {headers: [X-Card-Token], query: [api_key], json_fields: [card.number]}
`,
		env:  map[string]string{"RIG_UPSTREAM_KEY": rigUpstreamKey},
		logs: rig.logs, tp: tp, prop: propagation.TraceContext{},
	})
	return rig
}

// dispatchDue advances the clock past any retry delay and runs one
// dispatcher round to completion; it returns how many it claimed.
func (rig *traceRig) dispatchDue() int {
	rig.clock.Advance(time.Hour)
	n := rig.disp.Round(context.Background())
	rig.disp.Wait()
	return n
}

// named returns the ended spans called name, in the order they ended.
func (rig *traceRig) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rig.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// TestTraceOfAKeyedWriteThroughTheDispatcher is the case in
// process: a keyed POST carrying the caller's traceparent fails twice
// (the synchronous attempt, then the dispatcher's first retry) and then
// succeeds (the dispatcher's second): one trace, the caller's, with the
// admission span and three attempt spans in order, each a child of the
// admission; the upstream saw each attempt's own traceparent, one field,
// in that trace; the callout's stored context is the admission's; and
// the ingress's log lines carry the trace_id.
func TestTraceOfAKeyedWriteThroughTheDispatcher(t *testing.T) {
	rig := newTraceRig(t, 503, 503, 201)
	rec := rig.do(t, http.MethodPost, "/callout/api/v1/charges",
		http.Header{"Idempotency-Key": {"trace-1"}, "Traceparent": {callerParent}}, `{"amount":100}`)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("first answer %d %s, want 202", rec.Code, rec.Body)
	}
	id := rec.Header().Get("Callout-Id")
	for i := range 2 {
		if n := rig.dispatchDue(); n != 1 {
			t.Fatalf("dispatcher round %d claimed %d, want 1", i+1, n)
		}
	}
	if c, err := rig.store.Get(context.Background(), id); err != nil || c.State != policy.Succeeded {
		t.Fatalf("callout = %+v, %v; want succeeded", c, err)
	}

	adm := rig.named(tracing.SpanAdmission)
	atts := rig.named(tracing.SpanAttempt)
	if len(adm) != 1 || len(atts) != 3 {
		t.Fatalf("%d admission and %d attempt spans, want 1 and 3", len(adm), len(atts))
	}
	a := adm[0]
	if a.SpanContext().TraceID().String() != callerTrace || a.Parent().SpanID().String() != callerSpan ||
		!a.Parent().IsRemote() || a.SpanKind() != trace.SpanKindServer {
		t.Errorf("admission %v, parent %v: want a server span under the caller's", a.SpanContext(), a.Parent())
	}
	if got := tracingtest.Attrs(a); got["callout.admission"].AsString() != "attempt" || got["callout.id"].AsString() != id ||
		got["callout.endpoint"].AsString() != "api" || !got["callout.keyed"].AsBool() ||
		got["http.response.status_code"].AsInt64() != http.StatusAccepted {
		t.Errorf("admission attributes %v, want the callout's and the 202 the caller got", got)
	}
	// The server span covers what the caller waited for: the synchronous
	// attempt is inside it; the dispatched ones come after it.
	within(t, a, atts[0])
	if !atts[1].StartTime().After(a.EndTime()) {
		t.Error("the dispatcher's retry starts before the caller's answer")
	}
	want := []struct {
		n                   int64
		kind, mode, outcome string
		status              int64
		state               string
	}{
		{1, "first", "synchronous", "retryable", 503, "scheduled"},
		{2, "retry", "dispatched", "retryable", 503, "scheduled"},
		{3, "retry", "dispatched", "success", 201, "succeeded"},
	}
	for i, s := range atts {
		got := tracingtest.Attrs(s)
		w := want[i]
		if got["callout.attempt"].AsInt64() != w.n || got["callout.attempt.kind"].AsString() != w.kind ||
			got["callout.attempt.mode"].AsString() != w.mode || got["callout.outcome"].AsString() != w.outcome ||
			got["http.response.status_code"].AsInt64() != w.status || got["callout.state"].AsString() != w.state ||
			got["callout.id"].AsString() != id {
			t.Errorf("attempt span %d: %v, want %+v", i+1, got, w)
		}
		if s.SpanContext().TraceID().String() != callerTrace || s.Parent().SpanID() != a.SpanContext().SpanID() {
			t.Errorf("attempt span %d: %v parent %v, want a child of the admission in the caller's trace",
				i+1, s.SpanContext(), s.Parent())
		}
		if i > 0 && !s.StartTime().After(atts[i-1].EndTime()) {
			t.Errorf("attempt span %d starts before %d ended", i+1, i)
		}
		wantParent := "00-" + callerTrace + "-" + s.SpanContext().SpanID().String() + "-01"
		if rig.parents[i] != wantParent {
			t.Errorf("upstream request %d: traceparent %q, want only the attempt's %q", i+1, rig.parents[i], wantParent)
		}
	}
	if got := tracingtest.Attrs(atts[0])["callout.next_attempt_in_ms"].AsInt64(); got != 2500 {
		t.Errorf("first attempt's next_attempt_in_ms = %d, want 2500 (half of the 5 s base delay)", got)
	}
	if c, _ := rig.store.Get(context.Background(), id); !strings.HasPrefix(c.TraceContext,
		"00-"+callerTrace+"-"+a.SpanContext().SpanID().String()+"-01") {
		t.Errorf("stored trace context %q, want the admission span's", c.TraceContext)
	}
	// The ingress's attempt and the dispatcher's retries are logged alike
	// (forward.LogAttempt, every attempt under the default log.access),
	// each with the caller's trace_id.
	lines := rig.logs.MustRecords(t, "attempt")
	if len(lines) != 3 || lines[0]["kind"] != "first" || lines[1]["kind"] != "retry" || lines[2]["status"] != float64(201) {
		t.Errorf("attempt log lines %v, want the first and the two retries", lines)
	}
	for _, l := range lines {
		if l["trace_id"] != callerTrace {
			t.Errorf("attempt log line %v, want trace_id %s", l, callerTrace)
		}
	}
	tracingtest.KeysKnown(t, rig.spans.Ended())
}

// TestTraceOfInlineRetriesAndReads: under Prefer: wait=N the inline retry
// is an attempt span of mode inline after the synchronous one; a read
// without a key has an admission and one attempt span with no number
// (it keeps no record); a trace without a caller's context is the proxy's
// own, and the upstream is in it.
func TestTraceOfInlineRetriesAndReads(t *testing.T) {
	rig := newTraceRig(t, 503, 200, 200)
	rec := rig.do(t, http.MethodPost, "/callout/api/v1/charges",
		http.Header{"Idempotency-Key": {"inline-1"}, "Prefer": {"wait=10"}}, `{}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("inline: %d %s, want 200 after the inline retry", rec.Code, rec.Body)
	}
	rec = rig.do(t, http.MethodGet, "/callout/api/v1/status", nil, "")
	if rec.Code != http.StatusOK {
		t.Fatalf("read: %d %s", rec.Code, rec.Body)
	}
	atts := rig.named(tracing.SpanAttempt)
	adm := rig.named(tracing.SpanAdmission)
	if len(atts) != 3 || len(adm) != 2 {
		t.Fatalf("%d attempt, %d admission spans, want 3 and 2", len(atts), len(adm))
	}
	for i, mode := range []string{"synchronous", "inline", "synchronous"} {
		got := tracingtest.Attrs(atts[i])
		if got["callout.attempt.mode"].AsString() != mode || got["server.address"].AsString() != "127.0.0.1" ||
			got["server.port"].AsInt64() == 0 {
			t.Errorf("attempt span %d: mode %q, server %v:%v; want %q and the upstream's address and port",
				i+1, got["callout.attempt.mode"].AsString(), got["server.address"], got["server.port"], mode)
		}
	}
	// Both answers were 200: each server span carries it and holds its
	// attempts, the inline retry too.
	for i, s := range adm {
		if got := tracingtest.Attrs(s)["http.response.status_code"].AsInt64(); got != http.StatusOK || s.Status().Code.String() != "Unset" {
			t.Errorf("server span %d: status_code %d, status %v; want 200, unset", i+1, got, s.Status())
		}
	}
	within(t, adm[0], atts[0])
	within(t, adm[0], atts[1])
	within(t, adm[1], atts[2])
	if atts[0].SpanContext().TraceID() != atts[1].SpanContext().TraceID() ||
		atts[0].SpanContext().TraceID() == atts[2].SpanContext().TraceID() {
		t.Error("the inline retry must share its callout's trace; the read must have its own")
	}
	read := tracingtest.Attrs(atts[2])
	if read["callout.attempt"].Type() != attribute.INVALID || read["callout.attempt.kind"].AsString() != "first" ||
		read["callout.outcome"].AsString() != "success" {
		t.Errorf("read attempt attributes %v", read)
	}
	if !strings.HasSuffix(rig.parents[2], atts[2].SpanContext().SpanID().String()+"-01") ||
		!strings.Contains(rig.parents[2], atts[2].SpanContext().TraceID().String()) {
		t.Errorf("read's traceparent %q, want its attempt span's", rig.parents[2])
	}
}

// within fails unless child is a child span of parent that starts and
// ends inside it.
func within(t *testing.T, parent, child sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() ||
		child.StartTime().Before(parent.StartTime()) || child.EndTime().After(parent.EndTime()) {
		t.Errorf("%s [%v, %v] is not a child inside %s [%v, %v]", child.Name(), child.StartTime(), child.EndTime(),
			parent.Name(), parent.StartTime(), parent.EndTime())
	}
}

// TestTraceOfARejection: a refusal before dispatch ends the admission span
// with its problem code, makes no attempt span, and its log line carries
// the trace_id; a 5xx refusal (the proxy's) is an error, a 4xx is not.
func TestTraceOfARejection(t *testing.T) {
	rig := newTraceRig(t)
	rec := rig.do(t, http.MethodPost, "/callout/api/v1/charges", http.Header{"Traceparent": {callerParent}}, `{}`)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("%d %s, want 400 (no key)", rec.Code, rec.Body)
	}
	adm := rig.named(tracing.SpanAdmission)
	if len(adm) != 1 || len(rig.named(tracing.SpanAttempt)) != 0 {
		t.Fatalf("%d admission spans and %d attempt spans, want 1 and 0", len(adm), len(rig.named(tracing.SpanAttempt)))
	}
	got := tracingtest.Attrs(adm[0])
	if got["callout.admission"].AsString() != "rejected" || got["callout.problem"].AsString() != "idempotency-key-missing" ||
		got["http.response.status_code"].AsInt64() != 400 || adm[0].Status().Code.String() != "Unset" {
		t.Errorf("admission %v status %v", got, adm[0].Status())
	}
	lines := rig.logs.MustRecords(t, "rejected")
	if len(lines) != 1 || lines[0]["trace_id"] != callerTrace {
		t.Errorf("rejected log lines %v, want one with trace_id %s", lines, callerTrace)
	}
}

// TestSpansCarryNoSecret: the redact rules hold for spans too — no
// attribute carries the caller's token, a header value (a redacted one or
// an injected credential), the query, the body or the caller's path;
// spans name the route template and the endpoint instead, and every key
// is one of tracing.Keys.
func TestSpansCarryNoSecret(t *testing.T) {
	rig := newTraceRig(t, 503, 200)
	tok := rig.token(t)
	body := `{"card":{"number":"` + rigCardNumber + `"},"email":"jane@example.com"}`
	rec := rig.do(t, http.MethodPost, "/callout/api/v1/customers/cus_jane/charges?api_key="+rigQuerySecret,
		http.Header{"Idempotency-Key": {"secret-key-value-1"}, "X-Card-Token": {rigCardToken},
			"Cookie": {"session=cookie-secret"}}, body)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	rig.dispatchDue()
	if len(rig.spans.Ended()) != 3 {
		t.Fatalf("%d spans, want admission and two attempts", len(rig.spans.Ended()))
	}
	secrets := []string{tok, rigUpstreamKey, rigCardToken, rigQuerySecret, rigCardNumber, "cookie-secret",
		"jane@example.com", "cus_jane", "secret-key-value-1", "api_key", "/v1/customers"}
	for _, s := range rig.spans.Ended() {
		for _, kv := range s.Attributes() {
			for _, secret := range secrets {
				if strings.Contains(kv.Value.Emit(), secret) {
					t.Errorf("span %s attribute %s = %q carries %q", s.Name(), kv.Key, kv.Value.Emit(), secret)
				}
			}
		}
		for _, secret := range secrets {
			if strings.Contains(s.Status().Description, secret) {
				t.Errorf("span %s status %q carries %q", s.Name(), s.Status().Description, secret)
			}
		}
		if len(s.Events()) != 0 {
			t.Errorf("span %s has events %v: none are recorded", s.Name(), s.Events())
		}
	}
	if r := tracingtest.Attrs(rig.named(tracing.SpanAdmission)[0])["http.route"].AsString(); r != tracing.Route {
		t.Errorf("http.route = %q, want %q", r, tracing.Route)
	}
	tracingtest.KeysKnown(t, rig.spans.Ended())
}

// TestLongTraceStateIsShortened pushes past tracing.MaxTraceState: a
// caller's 31-member tracestate of about 900 bytes is still served, the
// callout keeps at most traceparent + 256 bytes of it, and the upstream
// gets the same short list; the next caller, with none, is served as usual.
func TestLongTraceStateIsShortened(t *testing.T) {
	rig := newTraceRig(t, 503, 200)
	var members []string
	for i := range 31 {
		members = append(members, "vendor"+strconv.Itoa(i)+"="+strings.Repeat("v", 22))
	}
	rec := rig.do(t, http.MethodPost, "/callout/api/v1/charges", http.Header{"Idempotency-Key": {"long-state"},
		"Traceparent": {callerParent}, "Tracestate": {strings.Join(members, ",")}}, `{}`)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("%d %s, want 202", rec.Code, rec.Body)
	}
	c, err := rig.store.Get(context.Background(), rec.Header().Get("Callout-Id"))
	if err != nil {
		t.Fatal(err)
	}
	_, state, _ := strings.Cut(c.TraceContext, ",")
	if len(c.TraceContext) > 55+1+tracing.MaxTraceState || !strings.HasPrefix(state, "vendor0=") || len(state) < 200 {
		t.Errorf("stored trace context of %d bytes: %q", len(c.TraceContext), c.TraceContext)
	}
	rig.dispatchDue()
	if rec := rig.do(t, http.MethodGet, "/callout/api/v1/status", nil, ""); rec.Code != http.StatusOK {
		t.Errorf("the next caller: %d", rec.Code)
	}
	if len(rig.parents) != 3 {
		t.Fatalf("upstream saw %d requests, want 3", len(rig.parents))
	}
	for i, want := range []string{state, state, ""} {
		if rig.states[i] != want {
			t.Errorf("upstream request %d: tracestate %q, want %q", i+1, rig.states[i], want)
		}
	}
}
