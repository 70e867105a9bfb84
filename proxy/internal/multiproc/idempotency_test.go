package multiproc

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// idemSetup is two replicas and the upstreams of TestIdempotencyAcrossReplicas.
type idemSetup struct {
	h    *harness
	a, b *proctest.Proxy
	// slow takes 3 s; fast answers 200 at once; reset resets its first
	// connection, then answers 200; counted answers 201 with the hit's
	// number in a header and the body; forbidden always answers 403.
	slow, fast, reset, counted, forbidden *proctest.Upstream
}

func newIdemSetup(t *testing.T) *idemSetup {
	s := &idemSetup{h: newHarness(t)}
	ok := reply(http.StatusOK, `{"ok":true}`)
	s.slow = proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
			reply(http.StatusCreated, `{"charge":"ch_slow"}`)(w, r)
		case <-r.Context().Done():
		}
	})
	s.fast = proctest.NewUpstream(t, ok)
	s.reset = proctest.NewUpstream(t, failFirst(1, resetConnection(t), ok))
	s.counted = proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := proctest.Received(r).N
		w.Header().Set("X-Upstream-Hit", fmt.Sprint(n))
		reply(http.StatusCreated, fmt.Sprintf(`{"charge":"ch_%d"}`, n))(w, r)
	})
	s.forbidden = proctest.NewUpstream(t, reply(http.StatusForbidden, `{"error":"not allowed"}`))
	cfg := s.h.config(msPolicy(),
		proctest.Endpoint("slow", s.slow.URL, loopbackNets),
		proctest.Endpoint("fast", s.fast.URL, loopbackNets),
		proctest.Endpoint("reset", s.reset.URL, loopbackNets),
		proctest.Endpoint("counted", s.counted.URL, loopbackNets),
		proctest.Endpoint("forbidden", s.forbidden.URL, loopbackNets))
	reps := proctest.StartReplicas(t, proxyBinary, 2, cfg, replicaEnv())
	s.a, s.b = reps[0], reps[1]
	return s
}

// TestIdempotencyAcrossReplicas checks contract §5 with two replicas
// sharing one Redis: a key's record is the same whichever replica is asked.
func TestIdempotencyAcrossReplicas(t *testing.T) {
	s := newIdemSetup(t)
	t.Run("concurrent duplicates reach the upstream once", s.concurrent)
	t.Run("same key for another request is 422", s.mismatch)
	t.Run("key rules", s.keyRules)
	t.Run("reset connection is retried with the same key", s.resetRetried)
	t.Run("the key is scoped by org", s.perOrg)
	t.Run("finished write is replayed", s.replayed)
	t.Run("dead-lettered key is 409", s.deadLettered)
	t.Run("metrics", s.metrics)
}

func (s *idemSetup) concurrent(t *testing.T) {
	h := s.h
	const path, body = "/callout/slow/v1/charges", `{"amount":300}`
	headers := hdr("Idempotency-Key", `"dup-1"`, "Content-Type", "application/json",
		"Authorization", bearer(t, prodIssuer))
	type result struct {
		resp response
		err  error
	}
	firstDone := make(chan result, 1)
	go func() {
		r, err := h.send(s.a.URL, http.MethodPost, path, headers, body)
		firstDone <- result{r, err}
	}()
	time.Sleep(5 * time.Millisecond) // the scenario: the duplicate comes 5 ms later, elsewhere
	second, err := h.send(s.b.URL, http.MethodPost, path, headers, body)
	first := <-firstDone
	if err != nil || first.err != nil {
		t.Fatalf("requests failed: %v / %v", first.err, err)
	}
	if n := len(s.slow.Requests("/v1/charges")); n != 1 {
		t.Fatalf("upstream hits = %d, want exactly 1", n)
	}
	winner, loser := first.resp, second
	if winner.Status != http.StatusCreated || winner.Header.Get("Idempotent-Replayed") != "" {
		winner, loser = second, first.resp
	}
	if winner.Status != http.StatusCreated || string(winner.Body) != `{"charge":"ch_slow"}` {
		t.Fatalf("no caller got the upstream's 201: %d %s / %d %s",
			first.resp.Status, first.resp.Body, second.Status, second.Body)
	}
	id := winner.Header.Get("Callout-Id")
	switch {
	case loser.Status == http.StatusConflict:
		pb := wantProblem(t, loser, http.StatusConflict, problem.InFlight, policy.Rejected)
		if loser.Header.Get("Retry-After") != "1" || pb.CalloutID != id {
			t.Errorf("409 in-flight: Retry-After %q, callout_id %q; want 1 and %q", loser.Header.Get("Retry-After"), pb.CalloutID, id)
		}
	case loser.Status == http.StatusCreated:
		if loser.Header.Get("Idempotent-Replayed") != "true" || string(loser.Body) != string(winner.Body) {
			t.Errorf("second 201 is not the replayed first result: %v %s", loser.Header, loser.Body)
		}
	default:
		t.Errorf("duplicate answered %d %s, want 409 in-flight or the first result", loser.Status, loser.Body)
	}
	if _, doc := h.status(t, s.b, id, prodIssuer); doc.State != policy.Succeeded || len(doc.Attempts) != 1 {
		t.Errorf("callout %s: state %s, %d attempts; want succeeded after 1", id, doc.State, len(doc.Attempts))
	}
}

func (s *idemSetup) mismatch(t *testing.T) {
	h := s.h
	key := hdr("Idempotency-Key", `"fp-1"`, "Content-Type", "application/json")
	if resp := h.call(t, s.a, http.MethodPost, "/callout/fast/v1/charges", key, `{"amount":100}`); resp.Status != http.StatusOK {
		t.Fatalf("first: %d %s", resp.Status, resp.Body)
	}
	for _, c := range []struct{ name, path, body string }{
		{"other body", "/callout/fast/v1/charges", `{"amount":200}`},
		{"other path", "/callout/fast/v1/refunds", `{"amount":100}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := h.call(t, s.b, http.MethodPost, c.path, key, c.body)
			wantProblem(t, resp, http.StatusUnprocessableEntity, problem.IdempotencyMismatch, policy.Rejected)
		})
	}
	hits := s.fast.Requests("")
	if len(hits) != 1 || string(hits[0].Body) != `{"amount":100}` || hits[0].RequestURI != "/v1/charges" {
		t.Errorf("upstream saw %+v, want only the first request", hits)
	}
}

func (s *idemSetup) resetRetried(t *testing.T) {
	h := s.h
	const key = `"reset-1"`
	resp := h.call(t, s.a, http.MethodPost, "/callout/reset/v1/charges", hdr("Idempotency-Key", key), `{"amount":7}`)
	id, doc := wantAccepted(t, resp)
	if len(doc.Attempts) == 0 || doc.Attempts[0].Status != 0 || doc.Attempts[0].Outcome != policy.Retryable ||
		doc.Attempts[0].Error == "" {
		t.Errorf("202 document attempts %+v: want a first attempt without response, retryable, with its error", doc.Attempts)
	}
	final := h.waitFinal(t, s.b, id, finalDeadline)
	if final.State != policy.Succeeded || len(final.Attempts) != 2 {
		t.Fatalf("final: state %s, attempts %+v; want succeeded after 2", final.State, final.Attempts)
	}
	hits := s.reset.Requests("")
	if len(hits) != 2 {
		t.Fatalf("upstream hits = %d, want 2", len(hits))
	}
	for _, hit := range hits {
		if got := hit.Header.Get("Idempotency-Key"); got != key || string(hit.Body) != `{"amount":7}` {
			t.Errorf("hit %d: key %q body %q; want the identical request with key %q", hit.N, got, hit.Body, key)
		}
	}
}

func (s *idemSetup) perOrg(t *testing.T) {
	h := s.h
	ids := map[string]bool{}
	for i, iss := range []string{prodIssuer, sandboxIssuer} {
		r := []*proctest.Proxy{s.a, s.b}[i]
		resp := h.call(t, r, http.MethodPost, "/callout/counted/v1/orgs",
			hdr("Idempotency-Key", `"org-1"`, "Authorization", bearer(t, iss)), `{"org":"same body"}`)
		if resp.Status != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("%s: %d %v; want a fresh 201 from the upstream", iss, resp.Status, resp.Header)
		}
		ids[resp.Header.Get("Callout-Id")] = true
	}
	if len(ids) != 2 || ids[""] {
		t.Errorf("callout ids %v, want two different ones", ids)
	}
	if n := len(s.counted.Requests("/v1/orgs")); n != 2 {
		t.Errorf("upstream hits = %d, want 2 (one per org)", n)
	}
}

func (s *idemSetup) replayed(t *testing.T) {
	h := s.h
	key := hdr("Idempotency-Key", `"replay-1"`, "Content-Type", "application/json")
	first := h.call(t, s.a, http.MethodPost, "/callout/counted/v1/replays", key, `{"amount":9}`)
	if first.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	again := h.call(t, s.b, http.MethodPost, "/callout/counted/v1/replays", key, `{"amount":9}`)
	if again.Status != first.Status || string(again.Body) != string(first.Body) {
		t.Errorf("replay %d %s, want %d %s", again.Status, again.Body, first.Status, first.Body)
	}
	for _, k := range []string{"Callout-Id", "X-Upstream-Hit", "Content-Type"} {
		if again.Header.Get(k) != first.Header.Get(k) {
			t.Errorf("replay %s = %q, want %q", k, again.Header.Get(k), first.Header.Get(k))
		}
	}
	if again.Header.Get("Idempotent-Replayed") != "true" || first.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Idempotent-Replayed: first %q, replay %q; want only the replay marked",
			first.Header.Get("Idempotent-Replayed"), again.Header.Get("Idempotent-Replayed"))
	}
	if n := len(s.counted.Requests("/v1/replays")); n != 1 {
		t.Errorf("upstream hits = %d, want 1", n)
	}
}

func (s *idemSetup) deadLettered(t *testing.T) {
	h := s.h
	resp := h.call(t, s.a, http.MethodPost, "/callout/forbidden/v1/charges",
		hdr("Idempotency-Key", `"dead-1"`, "Prefer", "respond-async"), `{"amount":1}`)
	id, _ := wantAccepted(t, resp)
	final := h.waitFinal(t, s.b, id, finalDeadline)
	if final.State != policy.DeadLettered || final.DeadLetterReason != string(policy.DeadLetterPermanent) ||
		len(final.Attempts) != 1 || final.Attempts[0].Status != http.StatusForbidden {
		t.Fatalf("final: state %s, reason %s, attempts %+v; want dead_lettered, permanent, one 403",
			final.State, final.DeadLetterReason, final.Attempts)
	}
	again := h.call(t, s.b, http.MethodPost, "/callout/forbidden/v1/charges", hdr("Idempotency-Key", `"dead-1"`), `{"amount":1}`)
	pb := wantProblem(t, again, http.StatusConflict, problem.DeadLettered, policy.Rejected)
	if pb.CalloutID != id || again.Header.Get("Callout-Id") != id {
		t.Errorf("409 callout id: body %q, header %q; want %q", pb.CalloutID, again.Header.Get("Callout-Id"), id)
	}
	if n := len(s.forbidden.Requests("")); n != 1 {
		t.Errorf("upstream hits = %d, want 1", n)
	}
}
