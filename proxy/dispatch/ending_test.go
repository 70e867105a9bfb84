package dispatch_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestDisabledDuringAttempt: the endpoint is disabled while an attempt is
// in flight; its 503 would be retried, but the store turns the retry into a
// dead letter, reason endpoint_disabled (contract §6). The dispatcher must
// report that ending with that reason, and no retry scheduled.
func TestDisabledDuringAttempt(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		h, up := payHarness(t, b, nil, held(http.StatusServiceUnavailable))
		d := h.dispatcher(h.store, dispatchOpts())
		id := h.enqueue("pay", http.MethodPost, "/v1/charges", "k-dis", time.Time{})
		if n := d.Round(ctxT(t)); n != 1 {
			t.Fatalf("round claimed %d, want 1", n)
		}
		eventually(t, "the request at the upstream", func() bool { return up.Hits() == 1 })
		if _, err := h.store.Disable(ctxT(t), "pay", "test: disabled by an admin"); err != nil {
			t.Fatalf("disable: %v", err)
		}
		up.Release()
		d.Wait()
		c := h.get(id)
		if c.State != policy.DeadLettered || c.DeadLetterReason != policy.DeadLetterEndpointDisabled {
			t.Fatalf("state %s reason %q, want dead_lettered endpoint_disabled", c.State, c.DeadLetterReason)
		}
		if n := h.ended.Load(); n != 1 {
			t.Errorf("%d endings reported, want one (the dead letter, reason endpoint_disabled)", n)
		}
		wantCounter(t, "dead letters endpoint_disabled", h.m.DeadLetters.WithLabelValues("pay", "endpoint_disabled"), 1)
		wantCounter(t, "dead letters without a reason", h.m.DeadLetters.WithLabelValues("pay", ""), 0)
		wantCounter(t, "retries scheduled", h.m.RetriesScheduled.WithLabelValues("pay", "status_5xx"), 0)
	})
}

// TestHeldPastMaxAgeNotDispatched: a callout's retry is held by an
// endpoint-wide pause that ends after its max_age window; when the pause
// ends it is exhausted (contract §3: 72h after the first attempt, whichever
// comes first) and becomes a dead letter without another dispatch, its
// attempt count unchanged. Here max_age is 10m and the pause 1h.
func TestHeldPastMaxAgeNotDispatched(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/limited" {
				w.Header().Set("Retry-After", "3600")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		h := newHarness(t, b, newConfig(t, []string{"max_age: 10m"}, ep{name: "pay", url: up.URL}))
		d := h.dispatcher(h.store, dispatchOpts())
		id := h.enqueue("pay", http.MethodPost, "/v1/charges", "k-old", time.Time{})
		h.enqueue("pay", http.MethodPost, "/limited", "k-429", time.Time{})
		if n := h.round(d); n != 2 {
			t.Fatalf("round claimed %d, want 2", n)
		}
		if c := h.get(id); c.State != policy.Held {
			t.Fatalf("after the 503: state %s, want held by the pause", c.State)
		}
		h.clk.Advance(time.Hour - time.Millisecond)
		if n := h.round(d); n != 0 {
			t.Fatalf("round during the pause claimed %d, want 0", n)
		}
		h.clk.Advance(time.Millisecond)
		if n := h.round(d); n != 1 {
			t.Fatalf("round after the pause claimed %d, want 1", n)
		}
		c := h.get(id)
		if c.State != policy.DeadLettered || c.DeadLetterReason != policy.DeadLetterExhausted {
			t.Fatalf("state %s reason %q, want dead_lettered exhausted", c.State, c.DeadLetterReason)
		}
		if c.Attempts != 1 || len(c.AttemptLog) != 1 || up.PathHits("/v1/charges") != 1 {
			t.Fatalf("attempts %d, log %d, upstream %d: want the one attempt made inside max_age",
				c.Attempts, len(c.AttemptLog), up.PathHits("/v1/charges"))
		}
		if c.LastError != "status_5xx" {
			t.Errorf("last error %q, want the last real attempt's status_5xx", c.LastError)
		}
		wantCounter(t, "dead letters exhausted", h.m.DeadLetters.WithLabelValues("pay", "exhausted"), 2)
		wantCounter(t, "retry attempts", h.m.Attempts.WithLabelValues("pay", "retryable", "retry"), 0)
	})
}

// TestReapedLastAttemptNotRepeated: with max_attempts 1, the only attempt
// is lost (its lease expires while the upstream hangs). It was a real
// dispatch, so the reaped callout is exhausted: the next replica does not
// send it again, and the attempt count stays 1 (contract §3: every real
// dispatch counts; 1 in all).
func TestReapedLastAttemptNotRepeated(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		h, up := payHarness(t, b, []string{"max_attempts: 1"}, held(http.StatusOK))
		d1 := h.dispatcher(h.store, dispatchOpts())
		d2 := h.dispatcher(h.newStore(), dispatchOpts())
		id := h.enqueue("pay", http.MethodPost, "/v1/charges", "k-lost", time.Time{})
		if n := d1.Round(ctxT(t)); n != 1 {
			t.Fatalf("replica 1 claimed %d, want 1", n)
		}
		eventually(t, "the request at the upstream", func() bool { return up.Hits() == 1 })
		h.clk.Advance(time.Hour)
		if n := h.round(d2); n != 1 {
			t.Fatalf("replica 2 claimed %d after the lease expired, want 1", n)
		}
		h.wantDeadLetter(id, policy.DeadLetterExhausted, 1)
		up.Release()
		d1.Wait()
		if up.Hits() != 1 {
			t.Fatalf("upstream saw %d requests, want 1", up.Hits())
		}
	})
}
