package dispatch_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
)

// changes records what the dispatcher told its BreakerWatcher.
type changes struct {
	mu             sync.Mutex
	opened, closed int
}

func (c *changes) Changed(_ context.Context, _ *config.Endpoint, ch policy.BreakerChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.Opened {
		c.opened++
	}
	if ch.Closed {
		c.closed++
	}
}

func (c *changes) counts() (opened, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closed
}

// healable answers 503 until healthy is set, then 200.
func healable(healthy *atomic.Bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// openBreaker enqueues n callouts on "pay" and fails them all in one
// Round, which opens the breaker (breaker_failures 2) at t0.
func openBreaker(t *testing.T, h *harness, d *dispatch.Dispatcher, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, h.enqueue("pay", http.MethodPost, "/v1/charges", "", time.Time{}))
	}
	if got := h.round(d); got != n {
		t.Fatalf("round claimed %d, want %d", got, n)
	}
	if st := h.state("pay"); st.Breaker != policy.BreakerOpen || !st.ProbeAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("breaker %s probe at %v, want open with its probe at t0+5m", st.Breaker, st.ProbeAt)
	}
	return ids
}

// TestBreakerHoldsAndProbes: consecutive failures open the breaker (contract
// §6); while it is open the dispatcher claims nothing and burns no
// attempt; at the probe time exactly one callout goes, as kind probe; its
// success closes the breaker and the held callouts follow.
func TestBreakerHoldsAndProbes(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		var healthy atomic.Bool
		h := breakerHarness(t, b, &healthy)
		watch := &changes{}
		o := dispatchOpts()
		o.Breakers = watch
		d := h.dispatcher(h.store, o)
		ids := openBreaker(t, h, d, 4)

		h.clk.Advance(5*time.Minute - time.Millisecond)
		if n := h.round(d); n != 0 {
			t.Fatalf("round while the breaker is open claimed %d", n)
		}
		for _, id := range ids {
			if c := h.get(id); c.State != policy.Held || c.Attempts != 1 {
				t.Fatalf("while open: state %s attempts %d, want held with 1", c.State, c.Attempts)
			}
		}
		healthy.Store(true)
		h.clk.Advance(time.Millisecond)
		if n := h.round(d); n != 1 {
			t.Fatalf("round at the probe time claimed %d, want exactly 1 probe", n)
		}
		if st := h.state("pay"); st.Breaker != policy.BreakerClosed {
			t.Fatalf("breaker %s after the probe succeeded, want closed", st.Breaker)
		}
		probes := 0
		for _, id := range ids {
			c := h.get(id)
			if c.State == policy.Succeeded && c.AttemptLog[len(c.AttemptLog)-1].Kind == policy.KindProbe {
				probes++
			}
		}
		if probes != 1 {
			t.Fatalf("%d callouts succeeded as the probe, want 1", probes)
		}
		if n := h.round(d); n != 3 {
			t.Fatalf("round after the breaker closed claimed %d, want the other 3", n)
		}
		for _, id := range ids {
			if c := h.get(id); c.State != policy.Succeeded || c.Attempts != 2 {
				t.Errorf("state %s attempts %d, want succeeded after 2", c.State, c.Attempts)
			}
		}
		if opened, closed := watch.counts(); opened != 1 || closed != 1 {
			t.Errorf("watcher saw %d opens and %d closes, want 1 and 1", opened, closed)
		}
	})
}

// TestResetBreakerResumesDispatch: an admin resets an open breaker
// (calloutctl endpoints reset). The dispatcher, which learnt the shut gate
// from a claim, must not sit on it until the old probe time: dispatch
// resumes within a second (the gate is re-read from Redis at least that
// often).
func TestResetBreakerResumesDispatch(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		var healthy atomic.Bool
		h := breakerHarness(t, b, &healthy)
		d := h.dispatcher(h.store, dispatchOpts())
		ids := openBreaker(t, h, d, 2)
		h.clk.Advance(time.Second)
		if n := h.round(d); n != 0 {
			t.Fatalf("round while the breaker is open claimed %d", n)
		}
		healthy.Store(true)
		if err := h.store.ResetBreaker(ctxT(t), "pay"); err != nil {
			t.Fatalf("reset breaker: %v", err)
		}
		h.clk.Advance(time.Second)
		// The failure that opened the breaker was held until the probe time
		// (t0+5m), and ResetBreaker does not re-score held callouts; the one
		// before it is due already.
		due := 0
		for _, id := range ids {
			if !h.get(id).NextAttemptAt.After(h.clk.Now()) {
				due++
			}
		}
		if due == 0 {
			t.Fatal("no callout is due after the reset")
		}
		if n := h.round(d); n != due {
			t.Fatalf("round a second after the reset claimed %d, want the %d due", n, due)
		}
	})
}
