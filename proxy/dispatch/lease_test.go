package dispatch_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestLeaseExpiryRedispatches: replica 1 claims a callout whose upstream
// call hangs; its lease (attempt limit + 10s) runs out on the injected
// clock; replica 2's Round reaps it and dispatches it again (contract §1: a
// replica may die at any moment, no accepted callout is lost). When
// replica 1's call finally returns, its Complete gets ErrStaleLease and
// changes nothing: the final state is replica 2's, the attempt count is 2
// (both were real dispatches), and the upstream saw the same
// Idempotency-Key twice (contract §5).
func TestLeaseExpiryRedispatches(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			n := proctest.Received(r).PathN
			if n == 1 {
				proctest.Hold(r)
				_, _ = io.WriteString(w, "late")
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "second")
		})
		h := newHarness(t, b, newConfig(t, nil, ep{name: "pay", url: up.URL, extra: []string{"header_timeout: 5s", "attempt_timeout: 5s"}}))
		rec1 := &recStore{Store: h.store}
		rec2 := &recStore{Store: h.newStore()}
		d1 := h.dispatcher(rec1, dispatchOpts())
		d2 := h.dispatcher(rec2, dispatchOpts())
		id := h.enqueue("pay", http.MethodPost, "/v1/charges", "order-42", time.Time{})

		if n := d1.Round(ctxT(t)); n != 1 {
			t.Fatalf("replica 1 claimed %d, want 1", n)
		}
		eventually(t, "replica 1's request at the upstream", func() bool { return up.Hits() == 1 })
		if n := h.round(d2); n != 0 {
			t.Fatalf("replica 2 claimed %d while the lease is live, want 0", n)
		}
		h.clk.Advance(5*time.Second + policy.LeaseGrace)
		if n := h.round(d2); n != 1 {
			t.Fatalf("replica 2 claimed %d after the lease expired, want 1", n)
		}
		want := h.get(id)
		if want.State != policy.Succeeded || want.Attempts != 2 || want.Response == nil ||
			string(want.Response.Body) != "second" {
			t.Fatalf("after replica 2: state %s attempts %d response %+v, want succeeded after 2 with its answer",
				want.State, want.Attempts, want.Response)
		}
		checkLeaseLog(t, want.AttemptLog)

		up.Release()
		d1.Wait()
		errs := rec1.completeErrs()
		if len(errs) != 1 {
			t.Fatalf("replica 1 completed %d times, want 1", len(errs))
		}
		wantErrIs(t, errs[0], policy.ErrStaleLease)
		got := h.get(id)
		if got.State != want.State || got.Attempts != 2 || len(got.AttemptLog) != 2 ||
			string(got.Response.Body) != "second" || !got.FinishedAt.Equal(want.FinishedAt) {
			t.Fatalf("replica 1's stale completion changed the callout: %+v", got)
		}
		reqs := up.Requests("")
		if len(reqs) != 2 || reqs[0].Header.Get("Idempotency-Key") != `"order-42"` || reqs[1].Header.Get("Idempotency-Key") != `"order-42"` {
			t.Fatalf("upstream requests = %+v, want two with Idempotency-Key \"order-42\"", reqs)
		}
		if n := h.ended.Load(); n != 1 || got.State != policy.Succeeded {
			t.Errorf("%d endings reported, state %s; want exactly one, succeeded (replica 2's)", n, got.State)
		}
	})
}

// TestLeaseExpiredLine: the warning of a reaped lease (a replica claimed
// the callout and was lost) carries the callout_id and the trace_id of the
// traceparent its caller sent, tracing off (contract §12 "log fields").
func TestLeaseExpiredLine(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		h, _ := payHarness(t, b, nil, status(http.StatusOK))
		const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		res, err := h.store.Enqueue(ctxT(t), policy.NewCallout{Endpoint: "pay", Issuer: testIssuer,
			Method: http.MethodPost, Path: "/c", Body: []byte(`{}`),
			TraceContext: "00-" + traceID + "-00f067aa0ba902b7-01"}, policy.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims, err := h.store.ClaimBatch(ctxT(t), []policy.ClaimRequest{{Endpoint: "pay",
			ClaimOptions: policy.ClaimOptions{Batch: 1, Lease: time.Second}}}, 1)
		if err != nil || len(claims) != 1 || len(claims[0].Claimed) != 1 {
			t.Fatalf("claim = %+v, %v; want the callout", claims, err)
		}
		h.clk.Advance(time.Second + policy.LeaseGrace)
		logs := &proctest.LogBuffer{}
		o := dispatchOpts()
		o.Logger, _ = logx.New(logs, logx.Options{})
		if n := h.round(h.dispatcher(h.newStore(), o)); n != 1 {
			t.Fatalf("claimed %d after the lease expired, want 1", n)
		}
		lines := logs.Records("lease expired; callout returned to the queue")
		if len(lines) != 1 || lines[0]["callout_id"] != res.ID || lines[0]["trace_id"] != traceID ||
			lines[0]["endpoint"] != "pay" {
			t.Fatalf("lease lines = %v, want one with callout_id %s, trace_id %s, endpoint pay", lines, res.ID, traceID)
		}
	})
}

// checkLeaseLog checks the log of a callout reaped once and then
// succeeded: the lost attempt (lease_expired) and replica 2's success.
func checkLeaseLog(t *testing.T, log []policy.Attempt) {
	t.Helper()
	if len(log) != 2 {
		t.Fatalf("attempt log = %+v, want 2 entries", log)
	}
	if a := log[0]; a.N != 1 || a.Kind != policy.KindFirst || a.Error != "lease_expired" || a.Outcome != policy.Retryable {
		t.Errorf("attempt 1 = %+v, want the first attempt, lease_expired", a)
	}
	if a := log[1]; a.N != 2 || a.Kind != policy.KindRetry || a.Status != 201 || a.Outcome != policy.Success {
		t.Errorf("attempt 2 = %+v, want a retry answered 201", a)
	}
}

// TestConcurrentRoundsClaimOnce: two replicas Round at the same time over
// the same due callouts; every callout is dispatched exactly once (contract
// §1: none ever runs in two places at once) and counts one attempt.
func TestConcurrentRoundsClaimOnce(t *testing.T) {
	const n = 40
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		h, up := payHarness(t, b, nil, status(http.StatusOK))
		opts := dispatch.Options{Concurrency: 16, PerEndpoint: 16, Batch: 3}
		ds := []*dispatch.Dispatcher{h.dispatcher(h.store, opts), h.dispatcher(h.newStore(), opts)}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = h.enqueue("pay", http.MethodPost, fmt.Sprintf("/c/%d", i), "", time.Time{})
		}
		claimed := 0
		for claimed < n {
			var wg sync.WaitGroup
			counts := make([]int, len(ds))
			for i, d := range ds {
				wg.Go(func() { counts[i] = h.round(d) })
			}
			wg.Wait()
			if counts[0]+counts[1] == 0 {
				t.Fatalf("no progress after %d of %d claimed", claimed, n)
			}
			claimed += counts[0] + counts[1]
		}
		if claimed != n {
			t.Fatalf("claimed %d in all, want %d", claimed, n)
		}
		for i, id := range ids {
			if got := up.PathHits(fmt.Sprintf("/c/%d", i)); got != 1 {
				t.Errorf("callout %d dispatched %d times, want 1", i, got)
			}
			if c := h.get(id); c.State != policy.Succeeded || c.Attempts != 1 {
				t.Errorf("callout %d: state %s attempts %d, want succeeded after 1", i, c.State, c.Attempts)
			}
		}
	})
}
