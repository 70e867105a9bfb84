package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// garbledReplayMark makes cl's completion fail at its last step: the
// record of the dead letter it names as replayed is not a hash, so the
// replay mark's HGET raises WRONGTYPE after the callout's own record was
// written (the review of 2026-12-01's trigger).
func garbledReplayMark(t *testing.T, e *env, cl *policy.Claimed) *policy.Claimed {
	t.Helper()
	n, _ := keyspace.ShardOfID(cl.ID)
	broken := *cl
	broken.ReplayOf = keyspace.IDOfRaw(n, "0123456789abcdef")
	rk, _ := keyspace.Callout(broken.ReplayOf)
	if err := e.b.Client.Set(ctxT(t), rk, "not a record", 0).Err(); err != nil {
		t.Fatal(err)
	}
	return &broken
}

// A completion that fails after its record was written (here the replay
// mark, its last step) keeps its counter and breaker changes: the callout
// is finished and off the lease set, so nothing else would ever release
// its charge (complete.lua "Isolation").
func TestCompletionFailingAfterItsRecordKeepsItsCounters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		mustEnqueue(t, s, "after-api", 1)
		cl := mustClaim(t, s, "after-api", ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
		if _, err := s.Complete(ctxT(t), garbledReplayMark(t, e, cl), success()); err == nil {
			t.Fatal("the completion did not fail at its replay mark: the test's trigger is gone")
		}
		if got := mustGet(t, s, cl.ID); got.State != policy.Succeeded {
			t.Fatalf("record %s, want succeeded", got.State)
		}
		if items, bytes := counters(t, s, "after-api"); items != 0 || bytes != 0 {
			t.Fatalf("a finished callout stays charged: %d items, %d bytes", items, bytes)
		}
	})
}

// The same for a probe: its success closes the breaker and frees the
// probe token although its completion failed at the replay mark.
func TestProbeCompletionFailingAfterItsRecordClosesTheBreaker(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		openBreaker(t, e, s, "after-probe", 20)
		e.clk.Advance(6 * time.Minute)
		mustEnqueue(t, s, "after-probe", 1)
		var probe *policy.Claimed
		for _, c := range mustClaim(t, s, "after-probe", ClaimOptions{Batch: 5, Lease: testLease}).Claimed {
			if c.Kind == policy.KindProbe {
				probe = c
			}
		}
		if probe == nil {
			t.Fatal("no probe claimed")
		}
		if _, err := s.Complete(ctxT(t), garbledReplayMark(t, e, probe), success()); err == nil {
			t.Fatal("the completion did not fail at its replay mark")
		}
		h := e.b.Client.HGetAll(ctxT(t), keyspace.HomeQueue("after-probe").EndpointHash).Val()
		if h["pt"] != "" || h["bs"] == "open" {
			t.Fatalf("the probe succeeded but the endpoint hash keeps pt=%q bs=%q", h["pt"], h["bs"])
		}
	})
}
