package dispatch_test

import (
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
)

// With a completion writer that refills (redisstore.Completer, as
// cmd/callout-proxy wires it), one Round's claim starts a drain that the
// attempts' completions continue: each one's script call claims the next
// callout of the queue for the slot it frees, so 20 callouts take one
// ClaimBatch, and the endpoint's bound (PerEndpoint 4) holds throughout.
func TestRefillsDrainInTheCompletionsCalls(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		h, up := payHarness(t, b, nil, status(http.StatusOK))
		ids := h.enqueueMany("pay", 20)
		c := redisstore.NewCompleter(h.store, batch.Options{})
		t.Cleanup(c.Close)
		rs := &recStore{Store: h.store}
		d := h.dispatcher(rs, dispatch.Options{Concurrency: 8, PerEndpoint: 4, Batch: 4, Completions: c})
		if n := h.round(d); n != 4 {
			t.Fatalf("the round claimed %d, want 4", n)
		}
		if got := rs.claimsOf("pay"); got != 1 {
			t.Errorf("%d ClaimBatch calls, want the round's one", got)
		}
		for i, id := range ids {
			if c := h.get(id); c.State != policy.Succeeded || c.Attempts != 1 {
				t.Errorf("callout %d: %s after %d attempts, want succeeded after 1", i, c.State, c.Attempts)
			}
		}
		if got := up.InFlight.Peak(); got > 4 {
			t.Errorf("%d requests in flight at once, over PerEndpoint 4", got)
		}
		if got := h.ended.Load(); got != 20 {
			t.Errorf("%d endings reported, want 20", got)
		}
		if st := h.state("pay"); st.Due != 0 || st.Leased != 0 {
			t.Errorf("pay: %d due, %d leased after the drain", st.Due, st.Leased)
		}
	})
}
