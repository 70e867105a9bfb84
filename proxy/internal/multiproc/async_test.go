package multiproc

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// asyncSetup is two replicas and the upstreams of TestAsyncRetriesAcrossReplicas.
type asyncSetup struct {
	h          *harness
	a, b       *proctest.Proxy
	recovering *proctest.Upstream // 503 (Retry-After: 1), 503, 503, then 200
	gated      *proctest.Upstream // answers 200 once release is closed
	release    func()
	waitOK     *proctest.Upstream // 503 twice, then 200
	waitDown   *proctest.Upstream // always 503
	reads      *proctest.Upstream // always 503
}

func newAsyncSetup(t *testing.T) *asyncSetup {
	s := &asyncSetup{h: newHarness(t)}
	ok := reply(http.StatusOK, `{"ok":true}`)
	unavailable := reply(http.StatusServiceUnavailable, `{"error":"down"}`)
	s.recovering = proctest.NewUpstream(t, failFirst(3, func(w http.ResponseWriter, r *http.Request) {
		n := proctest.Received(r).N
		if n == 1 {
			w.Header().Set("Retry-After", "1") // keeps the 202's callout scheduled for 1 s
		}
		unavailable(w, r)
	}, ok))
	gate := make(chan struct{})
	var once sync.Once
	s.release = func() { once.Do(func() { close(gate) }) }
	s.gated = proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
			ok(w, r)
		case <-r.Context().Done():
		}
	})
	s.waitOK = proctest.NewUpstream(t, failFirst(2, unavailable, ok))
	s.waitDown = proctest.NewUpstream(t, unavailable)
	s.reads = proctest.NewUpstream(t, unavailable)
	cfg := s.h.config(msPolicy(),
		proctest.Endpoint("recovering", s.recovering.URL, loopbackNets),
		proctest.Endpoint("gated", s.gated.URL, loopbackNets),
		proctest.Endpoint("wait-ok", s.waitOK.URL, loopbackNets, "attempt_timeout: 2s", "header_timeout: 2s"),
		proctest.Endpoint("wait-down", s.waitDown.URL, loopbackNets,
			"attempt_timeout: 300ms", "header_timeout: 300ms", "connect_timeout: 300ms"),
		proctest.Endpoint("reads", s.reads.URL, loopbackNets))
	reps := proctest.StartReplicas(t, proxyBinary, 2, cfg, replicaEnv())
	s.a, s.b = reps[0], reps[1]
	t.Cleanup(s.release) // before the replicas stop, so none waits on the gate
	return s
}

// TestAsyncRetriesAcrossReplicas checks contract §3 and §4 through two
// replicas sharing one Redis: what one replica accepted another reports
// and finishes.
func TestAsyncRetriesAcrossReplicas(t *testing.T) {
	s := newAsyncSetup(t)
	t.Run("retryable first attempt is scheduled and succeeds later", s.retryableWrite)
	t.Run("respond-async answers 202 before any attempt", s.respondAsync)
	t.Run("wait=5 retries inline to the final answer", s.waitInline)
	t.Run("wait=1 falls back to 202 within the wait", s.waitFallback)
	t.Run("reads are not scheduled", s.readNotScheduled)
	t.Run("policy document", s.policyDocument)
}

func (s *asyncSetup) retryableWrite(t *testing.T) {
	h := s.h
	const key = `"order-1"`
	resp := h.call(t, s.a, http.MethodPost, "/callout/recovering/v1/orders",
		hdr("Idempotency-Key", key, "Content-Type", "application/json"), `{"sku":"A1"}`)
	id, doc := wantAccepted(t, resp)
	if doc.State != policy.Scheduled || len(doc.Attempts) != 1 {
		t.Fatalf("202 document: state %s, %d attempts; want scheduled after 1: %s", doc.State, len(doc.Attempts), resp.Body)
	}
	first := doc.Attempts[0]
	wantAttempt(t, first, 1, policy.KindFirst, http.StatusServiceUnavailable, policy.Retryable)
	if doc.NextAttemptAt == nil || doc.NextAttemptAt.Before(first.StartedAt.Add(time.Second)) {
		t.Errorf("next_attempt_at = %v, want at least Retry-After (1 s) after %v", doc.NextAttemptAt, first.StartedAt)
	}

	final := h.waitFinal(t, s.b, id, time.Second+finalDeadline) // the other replica reports it
	if final.State != policy.Succeeded || len(final.Attempts) != 4 {
		t.Fatalf("final: state %s, attempts %+v; want succeeded after 4", final.State, final.Attempts)
	}
	for i, want := range []struct {
		kind   policy.Kind
		status int
		out    policy.Outcome
	}{
		{policy.KindFirst, 503, policy.Retryable}, {policy.KindRetry, 503, policy.Retryable},
		{policy.KindRetry, 503, policy.Retryable}, {policy.KindRetry, 200, policy.Success},
	} {
		wantAttempt(t, final.Attempts[i], i+1, want.kind, want.status, want.out)
	}
	if final.Response == nil || final.Response.Status != http.StatusOK || final.Outcome != policy.Success {
		t.Errorf("final response %+v, outcome %s; want the upstream's 200, success", final.Response, final.Outcome)
	}
	for _, hit := range s.recovering.Requests("/v1/orders") {
		if got := hit.Header.Get("Idempotency-Key"); got != key {
			t.Errorf("attempt %d sent Idempotency-Key %q, want %q", hit.N, got, key)
		}
	}

	// Only the caller's own organisation sees it (contract §4).
	other, _ := h.status(t, s.a, id, sandboxIssuer)
	wantProblem(t, other, http.StatusNotFound, problem.NotFound, policy.Rejected)
}

func (s *asyncSetup) respondAsync(t *testing.T) {
	h := s.h
	resp := h.call(t, s.a, http.MethodPost, "/callout/gated/v1/jobs",
		hdr("Idempotency-Key", `"job-1"`, "Prefer", "respond-async"), `{"n":1}`)
	id, doc := wantAccepted(t, resp)
	if got := resp.Header.Get("Preference-Applied"); got != "respond-async" {
		t.Errorf("Preference-Applied = %q, want respond-async", got)
	}
	// The upstream cannot have answered: it waits for release.
	if len(doc.Attempts) != 0 || (doc.State != policy.Scheduled && doc.State != policy.InFlight) {
		t.Errorf("202 document: state %s, attempts %+v; want scheduled (or just claimed) with none", doc.State, doc.Attempts)
	}
	s.release()
	final := h.waitFinal(t, s.b, id, finalDeadline)
	if final.State != policy.Succeeded || len(final.Attempts) != 1 {
		t.Fatalf("final: state %s, attempts %+v; want succeeded after 1", final.State, final.Attempts)
	}
	wantAttempt(t, final.Attempts[0], 1, policy.KindFirst, http.StatusOK, policy.Success)

	// A read asks for it too (contract §4: "same" for reads).
	resp = h.call(t, s.b, http.MethodGet, "/callout/gated/v1/jobs/1", hdr("Prefer", "respond-async"), "")
	id, _ = wantAccepted(t, resp)
	if got := resp.Header.Get("Preference-Applied"); got != "respond-async" {
		t.Errorf("read: Preference-Applied = %q, want respond-async", got)
	}
	if final := h.waitFinal(t, s.a, id, finalDeadline); final.State != policy.Succeeded || final.Method != http.MethodGet {
		t.Errorf("read: final state %s, method %s; want a succeeded GET", final.State, final.Method)
	}
}

func (s *asyncSetup) waitInline(t *testing.T) {
	h := s.h
	resp := h.call(t, s.a, http.MethodPost, "/callout/wait-ok/v1/pay",
		hdr("Idempotency-Key", `"pay-1"`, "Prefer", "wait=5"), `{"amount":5}`)
	if resp.Status != http.StatusOK || string(resp.Body) != `{"ok":true}` {
		t.Fatalf("status %d body %s; want the upstream's final 200 inline", resp.Status, resp.Body)
	}
	if got := resp.Header.Get("Preference-Applied"); got != "wait=5" {
		t.Errorf("Preference-Applied = %q, want wait=5", got)
	}
	if got := resp.Header.Get("Callout-Outcome"); got != string(policy.Success) {
		t.Errorf("Callout-Outcome = %q, want success", got)
	}
	id := resp.Header.Get("Callout-Id")
	got, doc := h.status(t, s.b, id, prodIssuer)
	if got.Status != http.StatusOK || doc.State != policy.Succeeded || len(doc.Attempts) != 3 {
		t.Fatalf("GET %s: %d, state %s, attempts %+v; want succeeded after 3", id, got.Status, doc.State, doc.Attempts)
	}
	wantAttempt(t, doc.Attempts[0], 1, policy.KindFirst, 503, policy.Retryable)
	wantAttempt(t, doc.Attempts[1], 2, policy.KindRetry, 503, policy.Retryable)
	wantAttempt(t, doc.Attempts[2], 3, policy.KindRetry, 200, policy.Success)
	if n := len(s.waitOK.Requests("")); n != 3 {
		t.Errorf("upstream hits = %d, want 3", n)
	}
}

func (s *asyncSetup) waitFallback(t *testing.T) {
	resp := s.h.call(t, s.a, http.MethodPost, "/callout/wait-down/v1/pay",
		hdr("Idempotency-Key", `"pay-2"`, "Prefer", "wait=1"), `{"amount":6}`)
	_, doc := wantAccepted(t, resp)
	// The last inline retry must leave room for a whole attempt (300 ms)
	// inside the second; 1 s of slack for a loaded machine.
	if resp.Elapsed > 2*time.Second {
		t.Errorf("202 after %s, want within about the 1 s the caller offered", resp.Elapsed)
	}
	if got := resp.Header.Get("Preference-Applied"); got != "wait=1" {
		t.Errorf("Preference-Applied = %q, want wait=1 (inline retries were made)", got)
	}
	if len(doc.Attempts) < 2 {
		t.Fatalf("attempts %+v: want the first and at least one inline retry", doc.Attempts)
	}
	wantAttempt(t, doc.Attempts[0], 1, policy.KindFirst, 503, policy.Retryable)
	wantAttempt(t, doc.Attempts[1], 2, policy.KindRetry, 503, policy.Retryable)
}

func (s *asyncSetup) readNotScheduled(t *testing.T) {
	resp := s.h.call(t, s.a, http.MethodGet, "/callout/reads/v1/items/7", nil, "")
	if resp.Status != http.StatusServiceUnavailable || string(resp.Body) != `{"error":"down"}` {
		t.Errorf("status %d body %s; want the upstream's 503 passed through", resp.Status, resp.Body)
	}
	if got := resp.Header.Get("Callout-Outcome"); got != string(policy.Retryable) {
		t.Errorf("Callout-Outcome = %q, want retryable", got)
	}
	for _, k := range []string{"Callout-Id", "Location"} {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("%s = %q on an unscheduled read, want none", k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items, _, err := s.h.store.Backlog(ctx, "reads")
	if err != nil || items != 0 {
		t.Errorf("backlog of reads = %d (%v), want nothing scheduled", items, err)
	}
	if n := len(s.reads.Requests("")); n != 1 {
		t.Errorf("upstream hits = %d, want 1", n)
	}
}

func (s *asyncSetup) policyDocument(t *testing.T) {
	resp := s.h.call(t, s.b, http.MethodGet, "/v1/policy", nil, "")
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/policy = %d: %s", resp.Status, resp.Body)
	}
	var doc api.PolicyDocument
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		t.Fatalf("policy document %s: %v", resp.Body, err)
	}
	if doc.MaxAttempts != 12 || doc.BaseDelay != "10ms" || doc.MaxDelay != "50ms" || doc.Multiplier != 2 {
		t.Errorf("policy = %+v, want the configured 12 attempts, 10ms ×2 up to 50ms", doc)
	}
	// 11 gaps with ceilings 10, 20, 40, then 50 ms eight times.
	want := policy.Envelope{Gaps: 11, Shortest: 0, Mean: 235 * time.Millisecond, Longest: 470 * time.Millisecond}
	if doc.Envelope != want {
		t.Errorf("envelope = %+v, want %+v", doc.Envelope, want)
	}
}

// wantAttempt asserts one attempt of a status document.
func wantAttempt(t *testing.T, a api.AttemptDoc, n int, kind policy.Kind, status int, out policy.Outcome) {
	t.Helper()
	if a.N != n || a.Kind != string(kind) || a.Status != status || a.Outcome != out {
		t.Errorf("attempt = %+v, want n %d, kind %s, status %d, outcome %s", a, n, kind, status, out)
	}
}
