package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestReplayOutcomeNotedOnTheDeadLetter: when a replay chain ends,
// complete.lua writes its final state on the dead letter it replays (while
// it is that dead letter's latest replay), and the listing, the summaries
// and the replay mark read it; a new replay clears the old outcome.
func TestReplayOutcomeNotedOnTheDeadLetter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ctx := ctxT(t)
		replayOnce := func(nc policy.NewCallout, dl string) string {
			t.Helper()
			nc.ReplayOf = dl
			res, err := s.Enqueue(ctx, nc, enqOpts)
			if err != nil || res.ID == "" {
				t.Fatalf("replay = %+v, %v", res, err)
			}
			if ok, err := deadLettersOf(s).MarkReplayed(ctx, dl, res.ID); !ok || err != nil {
				t.Fatalf("mark = %v, %v", ok, err)
			}
			return res.ID
		}
		outcome := func(dl string) policy.State {
			t.Helper()
			m, err := deadLettersOf(s).ReplayMarkOf(ctx, dl)
			if err != nil {
				t.Fatal(err)
			}
			sums, _ := deadLettersOf(s).Summaries(ctx, []string{dl})
			page, _ := deadLettersOf(s).DeadLetters(ctx, policy.DeadLetterQuery{Endpoint: "rx-api"})
			var listed policy.State = "missing"
			for _, d := range page.Items {
				if d.ID == dl {
					listed = d.ReplayOutcome
				}
			}
			if sums[0] == nil || sums[0].ReplayOutcome != m.ReplayOutcome || listed != m.ReplayOutcome {
				t.Fatalf("outcome of %s: mark %q, summary %+v, listing %q", dl, m.ReplayOutcome, sums[0], listed)
			}
			return m.ReplayOutcome
		}

		nc, dl := deadLetter(t, s, "rx-api", "k-rx")
		first := replayOnce(nc, dl)
		if got := outcome(dl); got != "" {
			t.Fatalf("pending replay: outcome %q, want none", got)
		}
		cl := mustClaim(t, s, "rx-api", claimOpts).Claimed[0]
		mustDeadLetter(t, s, cl, policy.DeadLetterPermanent)
		if got := outcome(dl); got != policy.DeadLettered {
			t.Fatalf("failed replay: outcome %q, want dead_lettered", got)
		}

		// The failed chain is a dead letter itself: replayed, it succeeds.
		second := replayOnce(nc, first)
		if got := outcome(first); got != "" {
			t.Fatalf("the chain's own replay pending: outcome %q", got)
		}
		cl = mustClaim(t, s, "rx-api", claimOpts).Claimed[0]
		mustComplete(t, s, cl, success())
		if got := outcome(first); got != policy.Succeeded {
			t.Fatalf("chain replayed with success: outcome %q", got)
		}
		if got := outcome(dl); got != policy.DeadLettered {
			t.Fatalf("the original names its own latest replay only: %q", got)
		}
		if m, _ := deadLettersOf(s).ReplayMarkOf(ctx, first); m.ReplayedBy != second || !m.ReplayEndedAt.Equal(e.clk.Now().Truncate(time.Millisecond)) {
			t.Fatalf("mark = %+v", m)
		}
		// A new replay of dl clears its old outcome.
		if ok, _ := deadLettersOf(s).MarkReplayed(ctx, dl, "another"); !ok {
			t.Fatal("mark failed")
		}
		if got := outcome(dl); got != "" {
			t.Fatalf("after a new replay: outcome %q, want none", got)
		}
	})
}
