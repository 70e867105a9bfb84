package dispatch_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestPauseOn429: a 429 with Retry-After: 60 on endpoint E pauses all of E
// until then (contract §3): E's other due callouts are not claimed and keep
// their attempt counts (a pause consumes no attempt), the paused 429 does
// not count toward the breaker (contract §6), and endpoint F is unaffected.
// When the clock reaches the pause's end everything on E is dispatched.
func TestPauseOn429(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		eUp := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			n := proctest.Received(r).PathN
			if r.URL.Path == "/first" && n == 1 {
				w.Header().Set("Retry-After", "60")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		fUp := proctest.NewUpstream(t, status(http.StatusOK))
		h := newHarness(t, b, newConfig(t, nil, ep{name: "e", url: eUp.URL}, ep{name: "f", url: fUp.URL}))
		d := h.dispatcher(h.store, dispatchOpts())
		first := h.enqueue("e", http.MethodPost, "/first", "", time.Time{})
		later := []string{
			h.enqueue("e", http.MethodPost, "/later", "", t0.Add(time.Second)),
			h.enqueue("e", http.MethodPost, "/later", "", t0.Add(2*time.Second)),
		}
		other := h.enqueue("f", http.MethodPost, "/other", "", t0.Add(time.Second))

		if n := h.round(d); n != 1 {
			t.Fatalf("first round claimed %d, want 1 (the 429)", n)
		}
		checkPaused(t, h, first)

		h.clk.Advance(2 * time.Second)
		if n := h.round(d); n != 1 {
			t.Fatalf("round during the pause claimed %d, want 1 (f's)", n)
		}
		if c := h.get(other); c.State != policy.Succeeded {
			t.Fatalf("f's callout: state %s, want succeeded: f is not paused", c.State)
		}
		h.clk.Advance(57*time.Second + 999*time.Millisecond) // t0+59.999s
		if n := h.round(d); n != 0 {
			t.Fatalf("round 1ms before the pause ends claimed %d, want 0", n)
		}
		for _, id := range later {
			if c := h.get(id); c.Attempts != 0 || c.State != policy.Held {
				t.Fatalf("e's waiting callout during the pause: state %s attempts %d, want held with 0", c.State, c.Attempts)
			}
		}
		if eUp.PathHits("/later") != 0 {
			t.Fatalf("e's upstream saw %d requests during the pause", eUp.PathHits("/later"))
		}

		h.clk.Advance(time.Millisecond) // t0+60s: the pause is over
		if n := h.round(d); n != 3 {
			t.Fatalf("round at the pause's end claimed %d, want 3", n)
		}
		wantAttempts := map[string]int{first: 2, later[0]: 1, later[1]: 1}
		for id, n := range wantAttempts {
			if c := h.get(id); c.State != policy.Succeeded || c.Attempts != n {
				t.Errorf("e's callout %s: state %s attempts %d, want succeeded after %d", id, c.State, c.Attempts, n)
			}
		}
		wantCounter(t, "retries after 429", h.m.RetriesScheduled.WithLabelValues("e", "status_429"), 1)

		// Schedule lag counts from the pause's end for callouts the pause
		// held, not from their due time: 5 claims, and only f's callout
		// (due t0+1s, claimed t0+2s) was late, by 1 s.
		var lag dto.Metric
		if err := h.m.ScheduleLag.Write(&lag); err != nil {
			t.Fatal(err)
		}
		if n, sum := lag.GetHistogram().GetSampleCount(), lag.GetHistogram().GetSampleSum(); n != 5 || sum > 1.01 {
			t.Errorf("schedule lag: %d samples summing %.3fs, want 5 summing about 1s (held time is not lag)", n, sum)
		}
	})
}

// checkPaused checks endpoint e right after the 429 to first: paused until
// t0+60s, no counting failure, first held until then.
func checkPaused(t *testing.T, h *harness, first string) {
	t.Helper()
	st := h.state("e")
	if st.Gate.State != policy.GatePaused || !st.PausedUntil.Equal(t0.Add(time.Minute)) || st.ConsecutiveFailures != 0 {
		t.Fatalf("e after the 429: gate %+v paused until %v failures %d; want paused until t0+60s, 0 failures",
			st.Gate, st.PausedUntil, st.ConsecutiveFailures)
	}
	if c := h.get(first); c.State != policy.Held || !c.NextAttemptAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the 429'd callout: state %s next %v, want held until t0+60s", c.State, c.NextAttemptAt)
	}
}

// TestShutGateCachedBriefly: once a claim has seen an endpoint's gate shut
// with callouts due behind it (the breaker's probe is out; the callouts it
// held are due from its probe time), the dispatcher skips the endpoint
// without asking Redis, but only for GateRecheck; then it claims again (so
// an admin's reset is seen).
func TestShutGateCachedBriefly(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		probing, release := make(chan struct{}), make(chan struct{})
		var failing atomic.Bool
		failing.Store(true)
		h, _ := payHarness(t, b, append([]string{"breaker_failures: 2"}, msPolicy...),
			func(w http.ResponseWriter, _ *http.Request) {
				if failing.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				close(probing)
				<-release
				w.WriteHeader(http.StatusOK)
			})
		rec := &recStore{Store: h.store}
		d := h.dispatcher(rec, dispatchOpts())
		openBreaker(t, h, d, 3)
		failing.Store(false)
		h.clk.Advance(5 * time.Minute)
		if n := d.Round(ctxT(t)); n != 1 {
			t.Fatalf("round at the probe time claimed %d, want the probe", n)
		}
		<-probing
		h.clk.Advance(time.Millisecond)
		if n := d.Round(ctxT(t)); n != 0 { // sees the probe out
			t.Fatalf("round with the probe out claimed %d", n)
		}
		seen := rec.claimsOf("pay")
		for range 5 {
			h.clk.Advance(dispatch.GateRecheck / 5)
			if n := d.Round(ctxT(t)); n != 0 {
				t.Fatalf("round with the probe out claimed %d", n)
			}
		}
		if got := rec.claimsOf("pay") - seen; got != 1 {
			t.Fatalf("%d claims within GateRecheck and at its end, want 1 (at its end)", got)
		}
		close(release)
		d.Wait()
	})
}
