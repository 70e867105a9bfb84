package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestReplayMarkAfterTheChainEnded: the replay service marks a dead letter
// after creating its chain, and the dispatcher may run the chain to its end
// first (complete.lua then finds no mark naming it): the mark notes the
// outcome the chain already has, so every replay ends with its mark.
func TestReplayMarkAfterTheChainEnded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ctx := ctxT(t)
		nc, dl := deadLetter(t, s, "late-mark-api", "k-late")
		nc.ReplayOf = dl
		res, err := s.Enqueue(ctx, nc, enqOpts)
		if err != nil || res.ID == "" {
			t.Fatalf("replay = %+v, %v", res, err)
		}
		e.clk.Advance(time.Second)
		cl := mustClaim(t, s, "late-mark-api", claimOpts).Claimed[0]
		mustComplete(t, s, cl, success())
		e.clk.Advance(time.Second)
		if ok, err := deadLettersOf(s).MarkReplayed(ctx, dl, res.ID); !ok || err != nil {
			t.Fatalf("mark = %v, %v", ok, err)
		}
		m, err := deadLettersOf(s).ReplayMarkOf(ctx, dl)
		if err != nil {
			t.Fatal(err)
		}
		ended := mustGet(t, s, res.ID).FinishedAt
		if m.ReplayedBy != res.ID || m.ReplayOutcome != policy.Succeeded || !m.ReplayEndedAt.Equal(ended) {
			t.Fatalf("mark after the chain ended = %+v, want %s succeeded at %v", m, res.ID, ended)
		}
	})
}
