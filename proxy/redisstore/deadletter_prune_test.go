package redisstore

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// A dead letter that prunes an expired index entry of another issuer's
// dead letter releases that issuer's share of the backlog bytes too
// ('ib:' its tag), not only the queue's ('bb'), whichever script makes
// it: a completion (complete.lua) or a disabled endpoint's drain
// (drain.lua). Else the other issuer's share would stay charged for
// bytes nothing holds any more, and its issuer_backlog_full cap would
// creep shut.
func TestDeadLetterPruneReleasesOtherIssuersShare(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		const ep = "prune-api"
		acc := keyspace.QueueAt(ep, keyspace.ShardOf(ep)).Counters
		old := req(ep, "", "{}")
		old.Issuer = "https://other.my.salesforce.com"
		other := "ib:" + keyspace.IssuerTag(old.Issuer)
		deadLetter := func(nc policy.NewCallout) {
			t.Helper()
			if _, err := s.Enqueue(ctxT(t), nc, enqOpts); err != nil {
				t.Fatal(err)
			}
			cl := mustClaim(t, s, ep, ClaimOptions{Batch: 1, Lease: testLease}).Claimed
			if len(cl) != 1 {
				t.Fatalf("claimed %d", len(cl))
			}
			comp := failure(e.clk.Now())
			comp.Action, comp.Reason, comp.CountsTowardBreaker = policy.ActionDeadLetter, policy.DeadLetterExhausted, false
			if r := mustComplete(t, s, cl[0], comp); r.State != policy.DeadLettered {
				t.Fatalf("dead letter: %+v", r)
			}
		}
		deadLetter(old)
		if v := e.b.Client.HGet(ctxT(t), acc, other).Val(); v == "" {
			t.Fatalf("the other issuer's dead letter charged nothing to its share (%s)", other)
		}
		e.clk.Advance(31 * day) // past DeadLetterRetention: its index entry is prunable
		deadLetter(req(ep, "", "{}"))
		if v := e.b.Client.HGet(ctxT(t), acc, other).Val(); v != "" {
			t.Errorf("after its index entry was pruned by a completion, the other issuer's share is still %s bytes", v)
		}

		// the same through a disabled endpoint's drain
		deadLetter(old)
		e.clk.Advance(31 * day)
		if _, err := s.Enqueue(ctxT(t), req(ep, "", "{}"), enqOpts); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Disable(ctxT(t), ep, "test"); err != nil {
			t.Fatal(err)
		}
		if v := e.b.Client.HGet(ctxT(t), acc, other).Val(); v != "" {
			t.Errorf("after its index entry was pruned by a drain, the other issuer's share is still %s bytes", v)
		}
	})
}
