package multiproc

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestBacklogCapSharedByReplicas is the backlog cap (ARCHITECTURE.md
// "Fairness", contract §2 "backlog full"): an endpoint with
// max_backlog_items: 2 whose upstream is down takes two writes, through
// either replica, and refuses the third with 503 backlog-full, before
// dispatch, so the refusal is not the key's result.
func TestBacklogCapSharedByReplicas(t *testing.T) {
	h := newHarness(t)
	// A slow policy keeps the two accepted callouts pending (retrying)
	// for the whole test: their next attempts are up to a minute away.
	slow := []string{"base_delay: 1m", "max_delay: 1m", "connect_timeout: 1s",
		"header_timeout: 2s", "attempt_timeout: 2s"}
	down := fmt.Sprintf("http://127.0.0.1:%d", proctest.ClosedPort(t))
	reps := proctest.StartReplicas(t, proxyBinary, 2, h.config(slow, proctest.Endpoint("capped", down, loopbackNets, "max_backlog_items: 2", "max_backlog_items_per_issuer: 2")), replicaEnv())

	for i, r := range []*proctest.Proxy{reps[0], reps[1]} {
		resp := h.call(t, r, http.MethodPost, "/callout/capped/v1/items",
			hdr("Idempotency-Key", fmt.Sprintf(`"cap-%d"`, i)), `{"n":1}`)
		if _, doc := wantAccepted(t, resp); doc.State.Finished() || len(doc.Attempts) != 1 ||
			doc.Attempts[0].Outcome != policy.Retryable {
			t.Fatalf("write %d: state %s, attempts %+v; want pending after a failed first attempt",
				i, doc.State, doc.Attempts)
		}
	}
	for _, r := range []*proctest.Proxy{reps[0], reps[1]} { // the same refused key twice
		resp := h.call(t, r, http.MethodPost, "/callout/capped/v1/items", hdr("Idempotency-Key", `"cap-2"`), `{"n":1}`)
		pb := wantProblem(t, resp, http.StatusServiceUnavailable, problem.BacklogFull, policy.Rejected)
		if pb.CalloutID != "" || resp.Header.Get("Callout-Id") != "" {
			t.Errorf("backlog-full carries callout id %q / %q: nothing should have been recorded",
				pb.CalloutID, resp.Header.Get("Callout-Id"))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if items, _, err := h.store.Backlog(ctx, "capped"); err != nil || items != 2 {
		t.Errorf("backlog = %d (%v), want the 2 accepted callouts", items, err)
	}
}
