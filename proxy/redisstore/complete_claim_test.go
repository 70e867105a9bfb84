package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// completeAndClaim completes cl through a new Completer on s, asking its
// call to claim up to want more of cl's queue.
func completeAndClaim(t *testing.T, s *Store, cl *policy.Claimed, comp policy.Completion, want int) (policy.CompleteResult, policy.ClaimResult, error) {
	t.Helper()
	c := NewCompleter(s, batch.Options{})
	defer c.Close()
	return c.CompleteAndClaim(ctxT(t), cl, comp, want, testLease)
}

// A finished attempt and the claim of its successors are one script call
// in one round trip: the completion is applied, the next callouts of its
// queue are leased with tokens their own completions fence on, in due
// order, up to want.
func TestCompleteAndClaimInOneCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := &pipeHook{}
		s := hookedStore(t, e, h)
		ids := mustEnqueue(t, s, "cc-api", 1)
		e.clk.Advance(time.Millisecond)
		ids = append(ids, mustEnqueue(t, s, "cc-api", 3)...)
		first := mustClaim(t, s, "cc-api", ClaimOptions{Batch: 1, Lease: testLease}).Claimed
		if len(first) != 1 || first[0].ID != ids[0] {
			t.Fatalf("claimed %+v, want %s", first, ids[0])
		}
		// the script known to Redis: no NOSCRIPT rerun by EVAL
		if err := s.rdb.ScriptLoad(ctxT(t), s.lua.complete.Source()).Err(); err != nil {
			t.Fatal(err)
		}
		h.pipelines.Store(0)
		h.cmds.Store(0)
		h.singles.Store(0)
		res, next, err := completeAndClaim(t, s, first[0], success(), 2)
		if err != nil || res.State != policy.Succeeded {
			t.Fatalf("completion: %+v, %v", res, err)
		}
		if p, c, one := h.pipelines.Load(), h.cmds.Load(), h.singles.Load(); p != 1 || c != 1 || one != 0 {
			t.Errorf("%d pipelines of %d commands and %d commands alone, want one script call", p, c, one)
		}
		if next.Gate.State != policy.GateOpen || len(next.Claimed) != 2 {
			t.Fatalf("claim: gate %+v, %d claimed, want open and 2", next.Gate, len(next.Claimed))
		}
		for i, cl := range next.Claimed {
			if cl.Attempt != 1 || cl.Kind != policy.KindFirst || cl.LeaseToken == "" || cl.Endpoint != "cc-api" {
				t.Errorf("claimed %d: %+v", i, cl)
			}
			if got := mustGet(t, s, cl.ID); got.State != policy.InFlight {
				t.Errorf("claimed %d: state %s, want in_flight", i, got.State)
			}
		}
		if st := mustState(t, s, "cc-api"); st.Due != 1 || st.Leased != 2 {
			t.Errorf("after the call: %d due, %d leased; want 1 and 2", st.Due, st.Leased)
		}
		// the leases are the claimed ones' own: a completion fences on them
		if r := mustComplete(t, s, next.Claimed[0], success()); r.State != policy.Succeeded {
			t.Errorf("completing a claimed one: %+v", r)
		}
		stale := *next.Claimed[1]
		stale.LeaseToken += "x"
		_, err = s.Complete(ctxT(t), &stale, success())
		wantErr(t, err, policy.ErrStaleLease)
	})
}

// A lease lost to the reaper is not completed by a late completion (its
// caller gets ErrStaleLease, the callout keeps its new lease), and the
// same call still claims the due callouts for the slot it frees — the
// reaped callout among them (at least once).
func TestCompleteAndClaimFencedLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ids := mustEnqueue(t, s, "cc-fence", 1)
		lost := mustClaim(t, s, "cc-fence", ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
		e.clk.Advance(testLease + time.Second)
		if reaped, err := s.Reap(ctxT(t), "cc-fence", 10); err != nil || len(reaped) != 1 {
			t.Fatalf("reap: %v, %v", reaped, err)
		}
		res, next, err := completeAndClaim(t, s, lost, success(), 2)
		wantErr(t, err, policy.ErrStaleLease)
		if res.State != "" {
			t.Errorf("a stale completion's result: %+v", res)
		}
		if len(next.Claimed) != 1 || next.Claimed[0].ID != ids[0] || next.Claimed[0].Attempt != 2 ||
			next.Claimed[0].LeaseToken == lost.LeaseToken {
			t.Fatalf("claimed %+v, want the reaped callout as attempt 2 under a new lease", next.Claimed)
		}
		if c := mustGet(t, s, ids[0]); c.State != policy.InFlight || c.Attempts != 2 {
			t.Errorf("the reaped callout: state %s, %d attempts; want in_flight after 2", c.State, c.Attempts)
		}
		if r := mustComplete(t, s, next.Claimed[0], success()); r.State != policy.Succeeded {
			t.Errorf("completing it under its new lease: %+v", r)
		}
	})
}

// A completion that opens the breaker shuts the gate before the claim in
// the same call reads it: nothing is claimed, the gate is reported, the
// failed callout is held and the others stay due.
func TestCompleteAndClaimAfterBreakerOpens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		mustEnqueue(t, s, "cc-brk", 3)
		cl := mustClaim(t, s, "cc-brk", ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
		fail := failure(e.clk.Now().Add(time.Second))
		fail.Breaker = policy.BreakerSettings{Failures: 1, ProbeInterval: time.Minute}
		res, next, err := completeAndClaim(t, s, cl, fail, 2)
		if err != nil || !res.Breaker.Opened || res.State != policy.Held {
			t.Fatalf("completion: %+v, %v; want held, breaker opened", res, err)
		}
		if len(next.Claimed) != 0 || next.Gate.State != policy.GateBreakerOpen {
			t.Fatalf("claim: %d claimed, gate %+v; want none behind breaker_open", len(next.Claimed), next.Gate)
		}
		if st := mustState(t, s, "cc-brk"); st.Due != 3 || st.Leased != 0 {
			t.Errorf("after the call: %d due, %d leased; want 3 and 0", st.Due, st.Leased)
		}
	})
}

// A sharded endpoint (shards: 2): a completion of either queue claims from
// its own queue only (one slot per call, on a cluster one node), behind the
// gate this replica viewed for the other queue; a failure there, whose
// breaker update is a call of its own after it, claims nothing in the call.
func TestCompleteAndClaimSharded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := shardedStore(e, "wide-cc", 2)
		for range 12 {
			mustEnqueueReq(t, s, req("wide-cc", "", "{}"))
		}
		cls := mustClaim(t, s, "wide-cc", ClaimOptions{Batch: 4, Lease: testLease}).Claimed
		home := keyspace.ShardOf("wide-cc")
		byShard := map[bool]*policy.Claimed{}
		for _, cl := range cls {
			n, _ := keyspace.ShardOfID(cl.ID)
			byShard[n == home] = cl
		}
		if byShard[true] == nil || byShard[false] == nil {
			t.Fatalf("claimed %d, not from both queues", len(cls))
		}
		for _, isHome := range []bool{true, false} {
			cl := byShard[isHome]
			want, _ := keyspace.ShardOfID(cl.ID)
			res, next, err := completeAndClaim(t, s, cl, success(), 2)
			if err != nil || res.State != policy.Succeeded {
				t.Fatalf("home %v: completion %+v, %v", isHome, res, err)
			}
			if len(next.Claimed) != 2 || next.Gate.State != policy.GateOpen {
				t.Fatalf("home %v: %d claimed, gate %+v; want 2 behind an open gate", isHome, len(next.Claimed), next.Gate)
			}
			for _, c := range next.Claimed {
				if n, _ := keyspace.ShardOfID(c.ID); n != want {
					t.Errorf("home %v: claimed %s of shard %d, want its own queue's (%d)", isHome, c.ID, n, want)
				}
				mustComplete(t, s, c, success())
			}
		}
		var other *policy.Claimed
		for _, cl := range cls {
			if n, _ := keyspace.ShardOfID(cl.ID); n != home && cl != byShard[false] {
				other = cl
			}
		}
		if other == nil {
			t.Fatalf("the first claim took one callout of the other queue only: %d claimed", len(cls))
		}
		_, next, err := completeAndClaim(t, s, other, failure(e.clk.Now().Add(time.Second)), 2)
		if err != nil || len(next.Claimed) != 0 {
			t.Fatalf("a failure of the other queue: %d claimed, %v; want none (its breaker update follows the call)", len(next.Claimed), err)
		}
	})
}

// Completions of one queue handed in together share one complete.lua call
// and its one claim: each caller gets up to its own want of the claimed,
// in hand-in order, and the call claims their sum.
func TestCompleteAndClaimSharedByACall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := &pipeHook{hold: make(chan struct{}), held: make(chan struct{})}
		s := hookedStore(t, e, h)
		mustEnqueue(t, s, "cc-share", 10)
		cls := mustClaim(t, s, "cc-share", ClaimOptions{Batch: 3, Lease: testLease}).Claimed
		holder := claimN(t, s, "holder-api", 1)[0]
		wants := []int{1, 3, 2}
		got := make([]policy.ClaimResult, len(cls))
		errs := make([]error, len(cls))
		calls := handInEach(t, s, h, holder, len(cls), func(c *Completer, i int) {
			_, got[i], errs[i] = c.CompleteAndClaim(ctxT(t), cls[i], success(), wants[i], testLease)
		})
		if calls != 1 {
			t.Errorf("3 completions of one queue went in %d script calls, want 1", calls)
		}
		seen := map[string]bool{}
		for i := range cls {
			if errs[i] != nil || len(got[i].Claimed) != wants[i] {
				t.Fatalf("caller %d: %d claimed, %v; want %d", i, len(got[i].Claimed), errs[i], wants[i])
			}
			for _, cl := range got[i].Claimed {
				if seen[cl.ID] {
					t.Fatalf("%s handed to two callers", cl.ID)
				}
				seen[cl.ID] = true
				mustComplete(t, s, cl, success())
			}
		}
		if st := mustState(t, s, "cc-share"); st.Due != 1 || st.Leased != 0 {
			t.Errorf("after: %d due, %d leased; want 1 and 0", st.Due, st.Leased)
		}
	})
}
