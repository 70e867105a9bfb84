package multiproc

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestSIGKILLMidAttemptLeaseExpiresAndAnotherReplicaFinishes is the
// crash case (contract §1 "any replica may die at any moment: no accepted
// callout is lost and none ever runs in two places at once", §3 leases),
// scaled down: attempt_timeout 3 s (lease 13 s), an upstream that works
// 1.5 s, the dispatching replica SIGKILLed 0.2 s into the attempt while
// two others run. The callout is re-dispatched by a survivor only after
// the lease expired, with the same Idempotency-Key, never overlapping the
// cut-off attempt, and ends succeeded.
func TestSIGKILLMidAttemptLeaseExpiresAndAnotherReplicaFinishes(t *testing.T) {
	h := newHarness(t)
	const work = 1500 * time.Millisecond
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(work):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"charged":true}`)
		case <-r.Context().Done(): // the proxy died: the attempt is cut off
		}
	})
	cfg := h.config(msPolicy(), proctest.Endpoint("slow", up.URL, loopbackNets, replicaHeader,
		"attempt_timeout: 3s", "header_timeout: 3s"))
	reps := proctest.StartReplicas(t, proxyBinary, 3, cfg, replicaEnv())
	lease := 3*time.Second + policy.LeaseGrace

	const key = `"kill-1"`
	resp := h.call(t, reps[0], http.MethodPost, "/callout/slow/v1/charges",
		hdr("Idempotency-Key", key, "Prefer", "respond-async", "Content-Type", "application/json"),
		`{"amount":100}`)
	id, _ := wantAccepted(t, resp)
	if got := resp.Header.Get("Preference-Applied"); got != "respond-async" {
		t.Errorf("Preference-Applied = %q, want respond-async", got)
	}

	first := up.WaitRequest(t, finalDeadline)
	victim := replicaNamed(t, reps, first.Header.Get("X-Replica"))
	// The scenario: the replica dies mid-attempt. 200 ms in leaves 1.3 s
	// before the upstream would answer, ample for a loaded machine.
	time.Sleep(200 * time.Millisecond)
	victim.Kill()
	t.Logf("killed %s, which dispatched the first attempt", victim.Name)

	survivor := otherThan(reps, victim)
	doc := h.waitFinal(t, survivor, id, lease+finalDeadline)
	hits := up.Requests("")
	if len(hits) != 2 {
		t.Fatalf("upstream hits = %d, want 2 (the cut-off attempt and the re-dispatch): %+v", len(hits), hits)
	}
	checkCrashHits(t, hits, key, victim.Name, work, lease)
	checkCrashDocument(t, doc)
}

// checkCrashHits asserts the upstream's view of the crash: the same key on
// both attempts, the first cut off by the kill, the second from another
// replica, started after the first ended and after the lease ran out.
func checkCrashHits(t *testing.T, hits []proctest.Request, key, victim string, work, lease time.Duration) {
	t.Helper()
	for _, h := range hits {
		if got := h.Header.Get("Idempotency-Key"); got != key {
			t.Errorf("hit %d: Idempotency-Key = %q, want %q on every attempt", h.N, got, key)
		}
	}
	cut, again := hits[0], hits[1]
	if cut.End.IsZero() || cut.End.Sub(cut.Start) >= work {
		t.Errorf("first attempt ran %s (ended %v): it should have been cut off by the kill before %s",
			cut.End.Sub(cut.Start), !cut.End.IsZero(), work)
	}
	if again.Start.Before(cut.End) {
		t.Errorf("attempts overlap: the second started %s before the first ended",
			cut.End.Sub(again.Start))
	}
	if got := again.Header.Get("X-Replica"); got == victim || got == "" {
		t.Errorf("second attempt from replica %q, want a survivor (victim %s)", got, victim)
	}
	// The claim came a few ms before the first hit; allow 1 s for that.
	if gap := again.Start.Sub(cut.Start); gap < lease-time.Second {
		t.Errorf("re-dispatched %s after the first attempt began, before its %s lease could expire", gap, lease)
	}
}

// checkCrashDocument asserts the status document of the crashed chain:
// the lost attempt recorded as lease_expired, then the successful retry.
func checkCrashDocument(t *testing.T, doc statusDoc) {
	t.Helper()
	if doc.State != policy.Succeeded {
		t.Fatalf("state = %s, want succeeded: %+v", doc.State, doc)
	}
	if len(doc.Attempts) != 2 {
		t.Fatalf("attempts = %+v, want 2", doc.Attempts)
	}
	lost, ok := doc.Attempts[0], doc.Attempts[1]
	if lost.N != 1 || lost.Kind != string(policy.KindFirst) || lost.Outcome != policy.Retryable ||
		lost.Error != "lease_expired" {
		t.Errorf("attempt 1 = %+v, want n 1, kind first, retryable, lease_expired", lost)
	}
	if ok.N != 2 || ok.Kind != string(policy.KindRetry) || ok.Status != http.StatusOK ||
		ok.Outcome != policy.Success {
		t.Errorf("attempt 2 = %+v, want n 2, kind retry, 200, success", ok)
	}
	if doc.Response == nil || doc.Response.Status != http.StatusOK || doc.Response.Body != `{"charged":true}` {
		t.Errorf("final response = %+v, want the upstream's 200", doc.Response)
	}
}

// replicaNamed returns the replica called name.
func replicaNamed(t *testing.T, reps []*proctest.Proxy, name string) *proctest.Proxy {
	t.Helper()
	for _, r := range reps {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no replica %q (X-Replica not injected?)", name)
	return nil
}

// otherThan returns the first replica that is not r.
func otherThan(reps []*proctest.Proxy, r *proctest.Proxy) *proctest.Proxy {
	for _, o := range reps {
		if o != r {
			return o
		}
	}
	return nil
}
