package dispatch_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// hungBacklog is how many due callouts the dead endpoint holds.
const hungBacklog = 500

// fairness is the setup of the fairness tests: endpoint "a" with
// hungBacklog due callouts whose upstream hangs until released, endpoint
// "b" with 5 due callouts.
type fairness struct {
	h          *harness
	aUp, bUp   *proctest.Upstream
	all        *proctest.Gauge // requests in flight at both upstreams
	aIDs, bIDs []string
}

func newFairness(t *testing.T, b redistest.Backend, bReply http.HandlerFunc, aExtra ...string) *fairness {
	f := &fairness{all: &proctest.Gauge{}}
	f.aUp = proctest.NewUpstream(t, held(http.StatusOK), f.all)
	f.bUp = proctest.NewUpstream(t, bReply, f.all)
	f.h = newHarness(t, b, newConfig(t, nil,
		ep{name: "a", url: f.aUp.URL, extra: aExtra}, ep{name: "b", url: f.bUp.URL}))
	f.aIDs = f.h.enqueueMany("a", hungBacklog)
	for i := range 5 {
		f.bIDs = append(f.bIDs, f.h.enqueue("b", http.MethodPost, fmt.Sprintf("/b/%d", i), "", time.Time{}))
	}
	return f
}

// claimedOf counts the callouts among ids that have been claimed at least
// once (the claim counts the attempt).
func (f *fairness) claimedOf(ids []string) int {
	n := 0
	for _, id := range ids {
		if f.h.get(id).Attempts > 0 {
			n++
		}
	}
	return n
}

// TestBatchBoundServesOtherEndpoints: one hung endpoint never starves the
// others (docs/limits.md). The replica has 8 slots and a per-endpoint
// bound (16) above that, so only the batch bound (4) stops "a", visited
// first, from taking every slot: the first Round claims 4 of a's and 4 of
// b's callouts; b's last one follows as soon as slots free up, while a's
// first 4 still hang.
func TestBatchBoundServesOtherEndpoints(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		// b answers its first 4 at once and holds the 5th, so round 2's
		// free slots do not depend on how fast b's answer comes back
		f := newFairness(t, b, func(w http.ResponseWriter, r *http.Request) {
			if proctest.Received(r).N > 4 {
				proctest.Hold(r)
			}
			w.WriteHeader(http.StatusOK)
		})
		h := f.h
		d := h.dispatcher(h.store, dispatch.Options{Concurrency: 8, PerEndpoint: 16, Batch: 4})
		if n := d.Round(ctxT(t)); n != 8 {
			t.Fatalf("round 1 claimed %d, want 8 (4 + 4)", n)
		}
		if got := f.claimedOf(f.bIDs); got != 4 {
			t.Fatalf("round 1 claimed %d of b's callouts, want 4", got)
		}
		if st := h.state("a"); st.Leased != 4 {
			t.Fatalf("round 1 leased %d of a's callouts, want 4", st.Leased)
		}
		// a's 4 stay in flight; as b's 4 finish, their slots free up and a
		// later Round claims b's last callout (b's upstream holds that one).
		eventually(t, "b's last callout to be claimed", func() bool {
			d.Round(ctxT(t))
			return f.claimedOf(f.bIDs) == 5
		})
		// a's first 4 still hang: their leases are held (the slots freed
		// were b's), and their requests reach a's upstream, which holds
		// every one, in their own time
		if st := h.state("a"); st.Leased < 4 {
			t.Fatalf("%d of a's callouts leased when b's last was claimed, want its first 4 still in flight", st.Leased)
		}
		eventually(t, "a's first 4 requests at its upstream", func() bool { return f.aUp.InFlight.Running() >= 4 })
		f.aUp.Release()
		f.bUp.Release()
		d.Wait()
		for i, id := range f.bIDs {
			if c := h.get(id); c.State != policy.Succeeded {
				t.Errorf("b's callout %d: state %s, want succeeded", i, c.State)
			}
		}
		if got := f.all.Peak(); got > 8 {
			t.Errorf("%d requests in flight at once, over the replica's 8", got)
		}
		if st := h.state("a"); st.Due > hungBacklog-4 || st.Leased != 0 {
			t.Errorf("a has %d due and %d leased, want at least 4 claimed, all done", st.Due, st.Leased)
		}
	})
}

// TestConcurrencyBounds: "a" sets max_concurrency 3, the replica has 5
// slots. Neither bound is ever exceeded, counted at the upstreams (an
// atomic max) while the upstreams hang and while they answer, across many
// Rounds that race the completions.
func TestConcurrencyBounds(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		f := newFairness(t, b, held(http.StatusOK), "max_concurrency: 3")
		h := f.h
		d := h.dispatcher(h.store, dispatch.Options{Concurrency: 5, PerEndpoint: 16, Batch: 16})
		if n := d.Round(ctxT(t)); n != 5 {
			t.Fatalf("round 1 claimed %d, want 5 (3 of a's, 2 of b's)", n)
		}
		eventually(t, "5 requests at the upstreams", func() bool { return f.all.Running() == 5 })
		for i := range 5 {
			if n := d.Round(ctxT(t)); n != 0 {
				t.Fatalf("round %d with every slot busy claimed %d", i+2, n)
			}
		}
		if st := h.state("a"); st.Leased != 3 {
			t.Fatalf("a has %d leased, want 3", st.Leased)
		}
		f.aUp.Release()
		f.bUp.Release()
		claimed := 5
		for i := range 40 {
			claimed += d.Round(ctxT(t))
			if st := h.state("a"); st.Leased > 3 {
				t.Fatalf("a has %d leased, over its max_concurrency 3", st.Leased)
			}
			if i%4 == 3 { // progress whatever the machine's speed
				d.Wait()
			}
		}
		d.Wait()
		if a, all := f.aUp.InFlight.Peak(), f.all.Peak(); a != 3 || all != 5 {
			t.Errorf("peak in flight: a %d, all %d; want 3 and 5", a, all)
		}
		if got := f.aUp.Hits() + f.bUp.Hits(); got != claimed {
			t.Errorf("upstreams saw %d requests for %d claims", got, claimed)
		}
		if got := f.claimedOf(f.bIDs); got != 5 {
			t.Errorf("%d of b's callouts claimed, want 5", got)
		}
	})
}
