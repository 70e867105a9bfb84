package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// A sharded endpoint's first dead letter of an outage, from a queue outside
// the endpoint hash's slot, tells the owner (contract §6: once per outage) even
// when a success of the home queue later in the same completion pipeline
// ends the outage: the notification is decided in the pipeline, right after
// the dead letter's breaker update, not after the pipeline (review finding
// of 2026-12-01; it was lost before). Applied one by one, the same.
func TestShardedDeadLetterTellsOwnerInAPipeline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, batched := range []bool{false, true} {
			ep := "ntf-seq"
			if batched {
				ep = "ntf-bat"
			}
			s := shardedStore(e, ep, 2)
			s.outbox = true
			for range 6 {
				mustEnqueueReq(t, s, req(ep, "", "{}"))
			}
			var home, other *policy.Claimed
			for _, c := range claimEvery(t, s, ep) {
				if n, _ := keyspace.ShardOfID(c.ID); n == keyspace.ShardOf(ep) {
					home = c
				} else {
					other = c
				}
			}
			if home == nil || other == nil {
				t.Fatal("need a callout in each queue")
			}
			dead := failure(time.Time{})
			dead.Action, dead.Reason = policy.ActionDeadLetter, policy.DeadLetterExhausted
			cls := []*policy.Claimed{other, home}
			comps := []policy.Completion{dead, success()}
			var res [2]policy.CompleteResult
			if batched {
				var ps []*completion
				for i := range cls {
					p, err := s.prepareComplete(ctxT(t), cls[i], comps[i])
					if err != nil {
						t.Fatal(err)
					}
					ps = append(ps, p)
				}
				if err := s.writeCompletions(ctxT(t), ps); err != nil {
					t.Fatal(err)
				}
				for i, p := range ps {
					var err error
					if res[i], err = s.finishComplete(ctxT(t), p); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				for i := range cls {
					res[i] = mustComplete(t, s, cls[i], comps[i])
				}
			}
			sfo := keyspace.HomeQueue(ep).SFO
			var told []string
			for _, m := range e.b.Client.ZRange(ctxT(t), sfo, 0, -1).Val() {
				if strings.HasPrefix(m, "o:") {
					told = append(told, m)
				}
			}
			if !res[0].NotifyOwner || len(told) != 1 || told[0] != "o:"+ep+":"+other.ID {
				t.Fatalf("batched %v: dead letter NotifyOwner %v, owner notices in the outbox %v; want told once, for %s",
					batched, res[0].NotifyOwner, told, other.ID)
			}
			if !res[1].Breaker.OutageEnded {
				t.Fatalf("batched %v: the success did not end the outage: %+v", batched, res[1].Breaker)
			}
		}
	})
}
