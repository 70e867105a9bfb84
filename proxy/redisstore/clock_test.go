package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Redis's clock decides shared state (contract §1, ARCHITECTURE.md "One
// clock"): two stores whose own clocks are 90 s apart, neither pinned, agree
// on every lease, due time and probe time, because the scripts read TIME and
// the stores pass durations only.

// skewedStore is a store whose own clock is Redis's shifted by skew, with
// scripts reading TIME (PinScriptTime off: how production runs).
func skewedStore(e *env, skew time.Duration) *Store {
	return New(e.b.Client, Options{
		Now:                  func() time.Time { return time.Now().Add(skew) },
		IdempotencyRetention: day, DeadLetterRetention: 30 * day,
	})
}

func TestLeasesAndDueTimesFollowRedisClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ahead, behind := skewedStore(e, 90*time.Second), skewedStore(e, -90*time.Second)
		const tol = 5 * time.Second // the test's own round trips, never the skew

		// A write accepted by the replica behind is due at Redis's now: the
		// replica ahead claims it, with a lease measured on Redis's clock.
		r, err := behind.Enqueue(ctxT(t), req("clock-api", "k1", "{}"), enqOpts)
		if err != nil {
			t.Fatal(err)
		}
		cl := mustClaim(t, ahead, "clock-api", claimOpts)
		if len(cl.Claimed) != 1 || cl.Claimed[0].ID != r.ID {
			t.Fatalf("claim by the replica ahead = %+v, want %s", cl, r.ID)
		}
		score, err := e.b.Client.ZScore(ctxT(t), orgQueue(keyspace.HomeQueue("clock-api")).Lease, r.ID).Result()
		if err != nil {
			t.Fatal(err)
		}
		redistest.Within(t, "lease expiry", time.UnixMilli(int64(score)), e.b.Now(t).Add(testLease), tol)

		// The replica ahead by 90 s sees the lease as long expired on its
		// own clock, yet its reaper leaves it: Redis's clock says 30 s.
		if reaped, err := ahead.Reap(ctxT(t), "clock-api", 10); err != nil || len(reaped) != 0 {
			t.Fatalf("reap by the replica ahead = %v, %v; want nothing (the lease is fresh)", reaped, err)
		}

		// A retry scheduled by the replica behind in 10 s (its clock) is due
		// 10 s after Redis's now, not 80 s before it.
		comp := failure(behind.now().Add(10 * time.Second))
		mustComplete(t, behind, cl.Claimed[0], comp)
		score, err = e.b.Client.ZScore(ctxT(t), orgQueue(keyspace.HomeQueue("clock-api")).Due, r.ID).Result()
		if err != nil {
			t.Fatal(err)
		}
		redistest.Within(t, "retry due time", time.UnixMilli(int64(score)), e.b.Now(t).Add(10*time.Second), tol)
		if got := mustClaim(t, ahead, "clock-api", claimOpts); len(got.Claimed) != 0 {
			t.Fatalf("the replica ahead claimed a retry due in 10 s: %+v", got.Claimed)
		}
		doc := mustGet(t, ahead, r.ID)
		if len(doc.AttemptLog) != 1 {
			t.Fatalf("attempt log = %+v, want one attempt", doc.AttemptLog)
		}
	})
}

func TestProbeTimeFollowsRedisClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		br := policy.BreakerSettings{Failures: 1, ProbeInterval: time.Minute, ProbeLease: time.Minute}
		for name, skew := range map[string]time.Duration{"probe-behind": -90 * time.Second, "probe-ahead": 90 * time.Second} {
			s := skewedStore(e, skew)
			// One counting failure opens the breaker (threshold 1) for the
			// probe interval, on Redis's clock whatever the replica's says.
			if _, err := s.RecordResult(ctxT(t), name, policy.ReadResult{Breaker: br, CountsTowardBreaker: true}); err != nil {
				t.Fatal(err)
			}
			a, err := s.Admit(ctxT(t), name, br)
			if err != nil {
				t.Fatal(err)
			}
			if a.Gate.State != policy.GateBreakerOpen || a.ProbeToken != "" {
				t.Fatalf("%s: admission right after opening = %+v, want breaker_open and no probe", name, a)
			}
			redistest.Within(t, name+": next probe time", a.Gate.Until, e.b.Now(t).Add(time.Minute), 5*time.Second)
		}
	})
}
