package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// counters reads endpoint's backlog counters as create.lua compares them
// with the caps: pending items (bi) and charged bytes (bb).
func counters(t *testing.T, s *Store, endpoint string) (items, bytes int64) {
	t.Helper()
	v, err := s.rdb.HMGet(ctxT(t), keyspace.Endpoint(endpoint), "bi", eBytes).Result()
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

// A synchronous first attempt (Begin) is charged to the backlog while in
// flight, like every pending callout, and every path releases exactly what
// it was charged: success, inline retry then retry then success, dead
// letter then discard, a reaped lease, a release. The counters end where
// they began.
func TestSynchronousAttemptCharged(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		const ep = "charge-api"
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
		want("in flight", 1, true)
		mustComplete(t, s, cl, success())
		want("succeeded", 0, false)

		cl = begin("retry")
		in := policy.Completion{Action: policy.ActionRetryInline, Lease: testLease,
			Attempt:  &policy.Attempt{StartedAt: t0, Status: 503, Outcome: policy.Retryable, Error: "status_5xx"},
			Response: &policy.Response{Status: 503, Body: []byte("x")}}
		if r := mustComplete(t, s, cl, in); r.State != policy.InFlight {
			t.Fatalf("inline retry: %+v", r)
		}
		want("inline retry, still in flight", 1, true)
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
		want("in flight before the reap", 1, true)
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
		want("in flight before the release", 1, true)
		if err := s.Release(ctxT(t), cl); err != nil {
			t.Fatal(err)
		}
		want("released", 0, false)
	})
}

// One organisation's synchronous writes hanging at its upstream fill only
// its own share of the endpoint, then are refused, and another
// organisation is still served; when they all fail retryably they stay
// within the share (the review of 2026-12-01 found that charging them only
// once pending let 40 pass a share of 5 and lock the others out).
func TestSynchronousWritesInFlightCountTowardShares(t *testing.T) {
	const noisy, quiet = "https://noisy.my.salesforce.com", "https://quiet.my.salesforce.com"
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		lim := policy.BacklogLimits{MaxItems: 10, MaxItemsPerIssuer: 5}
		var inFlight []*policy.Claimed
		refused := 0
		for i := range 40 {
			nc := bigRequest("share-sync", noisy, fmt.Sprintf("k-%d", i), 10, 10)
			r, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease, Limits: lim})
			switch {
			case errors.Is(err, policy.ErrIssuerBacklogFull):
				refused++
			case err != nil:
				t.Fatal(err)
			default:
				inFlight = append(inFlight, r.Claimed)
			}
		}
		if len(inFlight) != 5 || refused != 35 {
			t.Fatalf("noisy org: %d in flight, %d refused, want 5 and 35", len(inFlight), refused)
		}
		for _, cl := range inFlight {
			mustComplete(t, s, cl, failure(e.clk.Now().Add(time.Minute)))
		}
		if items, _ := counters(t, s, "share-sync"); items != 5 {
			t.Fatalf("after the retryable failures: %d pending, want the share of 5", items)
		}
		if _, err := s.Begin(ctxT(t), bigRequest("share-sync", quiet, "q", 10, 10),
			policy.BeginOptions{Lease: testLease, Limits: lim}); err != nil {
			t.Fatalf("the quiet org's first write: %v", err)
		}
	})
}

// The caps refuse a synchronous write when the pending backlog is full; a
// duplicate of a reserved key is answered first, full or not.
func TestSynchronousAttemptStillCapped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		lim := policy.BacklogLimits{MaxItems: 1}
		if _, err := s.Enqueue(ctxT(t), req("charge-cap", "a", "{}"), policy.EnqueueOptions{Limits: lim}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Begin(ctxT(t), req("charge-cap", "b", "{}"), policy.BeginOptions{Lease: testLease, Limits: lim})
		wantErr(t, err, policy.ErrBacklogFull)
		// A duplicate of a reserved key is answered first, full or not.
		r, err := s.Begin(ctxT(t), req("charge-cap", "a", "{}"), policy.BeginOptions{Lease: testLease, Limits: lim})
		if err != nil || r.Existing == nil {
			t.Fatalf("duplicate at a full backlog: %+v, %v", r, err)
		}
	})
}

// A duplicate of a reserved key is answered from its callout before the
// gate too (contract §5): at a disabled endpoint the same key still gets its
// result, a new key ErrDisabled, and Enqueue's dry run the existing callout.
func TestDuplicateAnsweredAtADisabledEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		orig := mustBegin(t, s, req("dup-disabled", "k", "{}"))
		mustComplete(t, s, orig, success())
		if _, err := s.Disable(ctxT(t), "dup-disabled", "test"); err != nil {
			t.Fatal(err)
		}
		r, err := s.Begin(ctxT(t), req("dup-disabled", "k", "{}"), policy.BeginOptions{Lease: testLease})
		if err != nil || r.Existing == nil || r.Existing.ID != orig.ID || !r.Existing.SameRequest {
			t.Fatalf("duplicate at a disabled endpoint: %+v, %v; want the existing callout %s", r, err, orig.ID)
		}
		dry, err := s.Enqueue(ctxT(t), req("dup-disabled", "k", "{}"), policy.EnqueueOptions{DryRun: true})
		if err != nil || dry.Existing == nil || dry.Existing.ID != orig.ID {
			t.Fatalf("dry run of a duplicate: %+v, %v", dry, err)
		}
		_, err = s.Begin(ctxT(t), req("dup-disabled", "new", "{}"), policy.BeginOptions{Lease: testLease})
		wantErr(t, err, policy.ErrDisabled)
	})
}
