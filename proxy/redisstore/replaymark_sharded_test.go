package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestReplayMarkSharded: on a sharded endpoint a replay without an
// Idempotency-Key is placed in another shard than its dead letter; its
// outcome is noted on the dead letter's mark whether the chain ends before
// MarkReplayed runs or after it (lua/replay_mark.lua).
func TestReplayMarkSharded(t *testing.T) {
	for _, markFirst := range []bool{false, true} {
		name := "chain ends first"
		if markFirst {
			name = "mark first"
		}
		t.Run(name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, e *env) {
				s := shardedStore(e, "rm-api", 3)
				ctx := ctxT(t)
				nc := req("rm-api", "", `{"n":1}`)
				if _, err := s.Enqueue(ctx, nc, enqOpts); err != nil {
					t.Fatal(err)
				}
				c := claimEvery(t, s, "rm-api")[0]
				mustDeadLetter(t, s, c, policy.DeadLetterPermanent)
				dl := c.ID
				nc.ReplayOf = dl
				res, err := s.Enqueue(ctx, nc, enqOpts)
				if err != nil || res.ID == "" {
					t.Fatalf("replay = %+v, %v", res, err)
				}
				if res.ID[:2] == dl[:2] {
					t.Fatalf("chain %s in the dead letter's shard: the case needs another", res.ID)
				}
				mark := func() {
					if ok, err := deadLettersOf(s).MarkReplayed(ctx, dl, res.ID); !ok || err != nil {
						t.Fatalf("mark = %v, %v", ok, err)
					}
				}
				if markFirst {
					mark()
				}
				e.clk.Advance(time.Second)
				for _, cl := range claimEvery(t, s, "rm-api") {
					mustComplete(t, s, cl, success())
				}
				if !markFirst {
					mark()
				}
				m, err := deadLettersOf(s).ReplayMarkOf(ctx, dl)
				if err != nil {
					t.Fatal(err)
				}
				if m.ReplayedBy != res.ID || m.ReplayOutcome != policy.Succeeded || m.ReplayEndedAt.IsZero() {
					t.Errorf("mark of %s (chain %s in another shard) = %+v, want outcome succeeded", dl, res.ID, m)
				}
			})
		})
	}
}
