package dispatch_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// msPolicy is a policy whose backoff is milliseconds, so a test walks a
// whole retry chain by advancing the clock a little.
var msPolicy = []string{"base_delay: 1ms", "multiplier: 2", "max_delay: 4ms"}

// TestRetryChainSucceeds: three 503s then a 201, all made by the
// dispatcher (contract §3, §4). One chain of 4 attempts, kinds
// first/retry/retry/retry, the same Idempotency-Key upstream every time
// (contract §5), final state succeeded with the final response, the attempt log
// complete, and attempts_total / retries_scheduled_total counting it.
func TestRetryChainSucceeds(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			n := proctest.Received(r).PathN
			if n <= 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("X-Charge", "ch_1")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"ch_1"}`)
		})
		h := newHarness(t, b, newConfig(t, msPolicy, ep{name: "pay", url: up.URL}))
		d := h.dispatcher(h.store, dispatch.Options{Rand: fixed(0.999)})
		id := h.enqueue("pay", http.MethodPost, "/v1/charges", "charge-42", time.Time{})
		for i := range 4 {
			if n := h.round(d); n != 1 {
				t.Fatalf("round %d claimed %d, want 1", i+1, n)
			}
			h.clk.Advance(4 * time.Millisecond) // max_delay: the retry is due
		}
		if n := h.round(d); n != 0 {
			t.Fatalf("a finished chain was claimed again (%d)", n)
		}
		c := h.get(id)
		if c.State != policy.Succeeded || c.Attempts != 4 {
			t.Fatalf("state %s after %d attempts, want succeeded after 4", c.State, c.Attempts)
		}
		if c.Response == nil || c.Response.Status != 201 || string(c.Response.Body) != `{"id":"ch_1"}` ||
			c.Response.Header.Get("X-Charge") != "ch_1" {
			t.Fatalf("final response = %+v, want the 201", c.Response)
		}
		checkChainLog(t, c.AttemptLog)
		for i, r := range up.Requests("") {
			if r.Header.Get("Idempotency-Key") != `"charge-42"` || r.Method != http.MethodPost || string(r.Body) != `{"amount":42}` {
				t.Errorf("upstream request %d = %+v, want the stored POST with its Idempotency-Key", i+1, r)
			}
		}
		if up.Hits() != 4 {
			t.Errorf("upstream saw %d requests, want 4", up.Hits())
		}
		wantCounter(t, "attempts first", h.m.Attempts.WithLabelValues("pay", "retryable", "first"), 1)
		wantCounter(t, "attempts retry retryable", h.m.Attempts.WithLabelValues("pay", "retryable", "retry"), 2)
		wantCounter(t, "attempts retry success", h.m.Attempts.WithLabelValues("pay", "success", "retry"), 1)
		wantCounter(t, "retries scheduled", h.m.RetriesScheduled.WithLabelValues("pay", "status_5xx"), 3)
		if n := h.ended.Load(); n != 1 || c.State != policy.Succeeded || c.DeadLetterReason != "" {
			t.Errorf("%d endings reported, state %s reason %q; want one, succeeded", n, c.State, c.DeadLetterReason)
		}
	})
}

// checkChainLog checks the attempt log of three 503s then a 201.
func checkChainLog(t *testing.T, log []policy.Attempt) {
	t.Helper()
	wantLog := []struct {
		kind   policy.Kind
		status int
		out    policy.Outcome
	}{
		{policy.KindFirst, 503, policy.Retryable}, {policy.KindRetry, 503, policy.Retryable},
		{policy.KindRetry, 503, policy.Retryable}, {policy.KindRetry, 201, policy.Success},
	}
	if len(log) != len(wantLog) {
		t.Fatalf("attempt log has %d entries, want 4: %+v", len(log), log)
	}
	for i, w := range wantLog {
		a := log[i]
		if a.N != i+1 || a.Kind != w.kind || a.Status != w.status || a.Outcome != w.out {
			t.Errorf("attempt %d = %+v, want n %d kind %s status %d %s", i+1, a, i+1, w.kind, w.status, w.out)
		}
	}
}

// TestAmbiguousWrite: an `idempotency: ignored` upstream reads a POST and
// never answers; the response-header limit (100ms) runs out. The write was sent
// with no answer, so it is never retried: one dispatch, dead letter
// ambiguous (contract §3). The same with `honoured` is rescheduled.
func TestAmbiguousWrite(t *testing.T) {
	// the header limit runs out first: the reason is exact
	limits := []string{"connect_timeout: 100ms", "header_timeout: 100ms", "attempt_timeout: 200ms"}
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		up := proctest.NewUpstream(t, held(http.StatusOK))
		h := newHarness(t, b, newConfig(t, nil,
			ep{name: "ignored", url: up.URL, extra: append([]string{"idempotency: ignored"}, limits...)},
			ep{name: "honoured", url: up.URL, extra: append([]string{"idempotency: honoured"}, limits...)}))
		d := h.dispatcher(h.store, dispatchOpts())
		ign := h.enqueue("ignored", http.MethodPost, "/ignored", "k-1", time.Time{})
		hon := h.enqueue("honoured", http.MethodPost, "/honoured", "k-1", time.Time{})
		if n := h.round(d); n != 2 {
			t.Fatalf("round claimed %d, want 2", n)
		}
		c := h.wantDeadLetter(ign, policy.DeadLetterAmbiguous, 1)
		if c.LastError != policy.ReasonHeaderTimeout {
			t.Errorf("ignored: last error %q, want %s", c.LastError, policy.ReasonHeaderTimeout)
		}
		c = h.get(hon)
		if c.State != policy.Scheduled || c.Attempts != 1 || c.NextAttemptAt.IsZero() {
			t.Fatalf("honoured: state %s attempts %d next %v, want scheduled after 1", c.State, c.Attempts, c.NextAttemptAt)
		}
		h.clk.Advance(time.Hour)
		if n := h.round(d); n != 1 {
			t.Fatalf("round an hour later claimed %d, want 1 (the honoured one)", n)
		}
		if up.PathHits("/ignored") != 1 || up.PathHits("/honoured") != 2 {
			t.Errorf("upstream saw ignored %d, honoured %d; want 1 and 2", up.PathHits("/ignored"), up.PathHits("/honoured"))
		}
		if n, c := h.ended.Load(), h.get(ign); n != 1 || c.DeadLetterReason != policy.DeadLetterAmbiguous {
			t.Errorf("%d endings reported; the ambiguous write's reason %q, want one, ambiguous", n, c.DeadLetterReason)
		}
		wantCounter(t, "dead letters ambiguous", h.m.DeadLetters.WithLabelValues("ignored", "ambiguous"), 1)
		wantCounter(t, "retries honoured", h.m.RetriesScheduled.WithLabelValues("honoured", "header_timeout"), 2)
	})
}

// TestPermanentDeadLetteredAtOnce: an upstream that answers 403 to a
// scheduled callout: one dispatch, a dead letter (reason permanent) at
// once, never retried (contract §2, §7).
func TestPermanentDeadLetteredAtOnce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		h, up := payHarness(t, b, nil, status(http.StatusForbidden))
		d := h.dispatcher(h.store, dispatchOpts())
		id := h.enqueue("pay", http.MethodPost, "/v1/charges", "k-403", time.Time{})
		if n := h.round(d); n != 1 {
			t.Fatalf("round claimed %d, want 1", n)
		}
		for range 3 {
			h.clk.Advance(7 * time.Hour)
			if n := h.round(d); n != 0 {
				t.Fatalf("a permanent failure was claimed again (%d)", n)
			}
		}
		if c := h.wantDeadLetter(id, policy.DeadLetterPermanent, 1); c.Response == nil || c.Response.Status != 403 {
			t.Fatalf("response %+v, want the one 403", c.Response)
		}
		if up.Hits() != 1 {
			t.Errorf("upstream saw %d requests, want 1", up.Hits())
		}
		if st := h.state("pay"); st.Due != 0 || st.Leased != 0 || st.DeadLetters != 1 {
			t.Errorf("endpoint queues due %d leased %d dead letters %d, want 0, 0, 1", st.Due, st.Leased, st.DeadLetters)
		}
		wantCounter(t, "dead letters permanent", h.m.DeadLetters.WithLabelValues("pay", "permanent"), 1)
		wantCounter(t, "attempts", h.m.Attempts.WithLabelValues("pay", "permanent", "first"), 1)
	})
}

// wantCounter fails the test when c's value is not want.
func wantCounter(t *testing.T, what string, c prometheus.Collector, want float64) {
	t.Helper()
	if got := testutil.ToFloat64(c); got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
