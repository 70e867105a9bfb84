package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// counters reads endpoint's backlog counters as create.lua compares them
// with the caps: pending items (bi) and charged bytes (bb).
func counters(t *testing.T, s *Store, endpoint string) (items, bytes int64) {
	t.Helper()
	v, err := s.rdb.HMGet(ctxT(t), keysOf(endpoint).ep, "bi", eBytes).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := func(x any) int64 {
		str, _ := x.(string)
		i, _ := strconv.ParseInt(str, 10, 64)
		return i
	}
	return n(v[0]), n(v[1])
}

// A synchronous first attempt (Begin) is charged to the backlog only when
// its callout becomes pending — a retry scheduled or held, a dead letter, a
// lease reaped — and then with everything it stores; one that ends at once
// was never charged and releases nothing (create.lua 'u'). The counters
// end where they began on every path.
func TestSynchronousAttemptChargedWhenPending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		const ep = "unch-api"
		want := func(step string, items int64, positive bool) int64 {
			t.Helper()
			i, b := counters(t, s, ep)
			if i != items || (b > 0) != positive || b < 0 {
				t.Fatalf("%s: counters %d items %d bytes, want %d items and bytes > 0 = %v", step, i, b, items, positive)
			}
			return b
		}
		begin := func(key string) *policy.Claimed {
			t.Helper()
			return mustBegin(t, s, req(ep, key, `{"a":1}`))
		}

		cl := begin("ok")
		want("in flight", 0, false)
		mustComplete(t, s, cl, success())
		want("succeeded", 0, false)

		cl = begin("retry")
		in := policy.Completion{Action: policy.ActionRetryInline, Lease: testLease,
			Attempt:  &policy.Attempt{StartedAt: t0, Status: 503, Outcome: policy.Retryable, Error: "status_5xx"},
			Response: &policy.Response{Status: 503, Body: []byte("x")}}
		if r := mustComplete(t, s, cl, in); r.State != policy.InFlight {
			t.Fatalf("inline retry: %+v", r)
		}
		want("inline retry, still in flight", 0, false)
		mustComplete(t, s, cl, failure(e.clk.Now().Add(time.Minute)))
		charged := want("retry scheduled", 1, true)
		if got := mustGet(t, s, cl.ID); got.State != policy.Scheduled {
			t.Fatalf("state %s", got.State)
		}
		// The record's own charge is what the counters got: claiming and
		// succeeding releases exactly that.
		e.clk.Advance(time.Minute)
		again := mustClaim(t, s, ep, claimOpts).Claimed
		if len(again) != 1 {
			t.Fatalf("claimed %d", len(again))
		}
		if _, b := counters(t, s, ep); b != charged {
			t.Fatalf("a claim changed the charge: %d -> %d", charged, b)
		}
		mustComplete(t, s, again[0], success())
		want("retry succeeded", 0, false)

		cl = begin("dead")
		dl := failure(time.Time{})
		dl.Action, dl.Reason = policy.ActionDeadLetter, policy.DeadLetterAmbiguous
		if r := mustComplete(t, s, cl, dl); r.State != policy.DeadLettered {
			t.Fatalf("dead letter: %+v", r)
		}
		want("dead letter (no pending item, its bytes charged)", 0, true)
		if err := s.Discard(ctxT(t), cl.ID); err != nil {
			t.Fatal(err)
		}
		want("dead letter discarded", 0, false)

		cl = begin("reaped")
		e.clk.Advance(testLease)
		if ids, err := s.Reap(ctxT(t), ep, 10); err != nil || len(ids) != 1 {
			t.Fatalf("reap: %v %v", ids, err)
		}
		want("reaped, scheduled", 1, true)
		again = mustClaim(t, s, ep, claimOpts).Claimed
		if len(again) != 1 {
			t.Fatalf("claimed %d after the reap", len(again))
		}
		mustComplete(t, s, again[0], success())
		want("reaped callout succeeded", 0, false)

		cl = begin("released")
		if err := s.Release(ctxT(t), cl); err != nil {
			t.Fatal(err)
		}
		want("released", 0, false)
	})
}

// The caps still refuse a synchronous write when the pending backlog is
// full, though its own attempt is not charged while in flight.
func TestSynchronousAttemptStillCapped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		lim := policy.BacklogLimits{MaxItems: 1}
		if _, err := s.Enqueue(ctxT(t), req("unch-cap", "a", "{}"), policy.EnqueueOptions{Limits: lim}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Begin(ctxT(t), req("unch-cap", "b", "{}"), policy.BeginOptions{Lease: testLease, Limits: lim})
		wantErr(t, err, policy.ErrBacklogFull)
		// A duplicate of a reserved key is answered first, full or not.
		r, err := s.Begin(ctxT(t), req("unch-cap", "a", "{}"), policy.BeginOptions{Lease: testLease, Limits: lim})
		if err != nil || r.Existing == nil {
			t.Fatalf("duplicate at a full backlog: %+v, %v", r, err)
		}
	})
}
