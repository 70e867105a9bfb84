package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// deadLetter records a keyed callout of endpoint and makes it a dead
// letter (reason permanent) at the clock's time; it returns its request.
func deadLetter(t *testing.T, s *Store, endpoint, key string) (policy.NewCallout, string) {
	t.Helper()
	nc := req(endpoint, key, `{"n":1}`)
	if _, err := s.Enqueue(ctxT(t), nc, enqOpts); err != nil {
		t.Fatal(err)
	}
	c := mustClaim(t, s, endpoint, ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
	mustDeadLetter(t, s, c, policy.DeadLetterPermanent)
	return nc, c.ID
}

// TestReplayedDeadLetterKeepsHistory: a replay is a new chain (kind
// replay, fresh attempt count and window, the original key) that completes
// like any callout, while the dead letter it replays keeps its record and
// history until the dead-letter retention ends (contract §7, §8).
func TestReplayedDeadLetterKeepsHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		nc, dl := deadLetter(t, s, "hist-api", "key-7")
		e.clk.Advance(time.Hour)
		nc.ReplayOf = dl
		res, err := s.Enqueue(ctxT(t), nc, enqOpts)
		if err != nil || res.ID == "" {
			t.Fatalf("replay = %+v, %v", res, err)
		}
		if ok, err := deadLettersOf(s).MarkReplayed(ctxT(t), dl, res.ID); !ok || err != nil {
			t.Fatalf("mark = %v, %v", ok, err)
		}
		cl := mustClaim(t, s, "hist-api", claimOpts).Claimed[0]
		if cl.Kind != policy.KindReplay || cl.Attempt != 1 || !cl.FirstAttemptAt.Equal(t0.Add(time.Hour)) ||
			cl.ReplayOf != dl || cl.IdempotencyKey != "key-7" || string(cl.Body) != `{"n":1}` {
			t.Fatalf("replay claim = %+v", cl)
		}
		if out := mustComplete(t, s, cl, success()); out.State != policy.Succeeded || out.Attempts != 1 {
			t.Fatalf("replay completion = %+v", out)
		}
		chain := mustGet(t, s, res.ID)
		if chain.State != policy.Succeeded || len(chain.AttemptLog) != 1 || chain.AttemptLog[0].Kind != policy.KindReplay {
			t.Fatalf("chain = %+v", chain)
		}
		orig := mustGet(t, s, dl)
		if orig.State != policy.DeadLettered || len(orig.AttemptLog) != 1 || orig.DeadLetterReason != policy.DeadLetterPermanent {
			t.Fatalf("replayed dead letter = %+v", orig)
		}
		page, _ := deadLettersOf(s).DeadLetters(ctxT(t), policy.DeadLetterQuery{Endpoint: "hist-api"})
		if len(page.Items) != 1 || page.Items[0].ReplayedBy != res.ID || !page.Items[0].ReplayedAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("listing = %+v", page.Items)
		}
		if m, _ := deadLettersOf(s).ReplayMarkOf(ctxT(t), dl); m.ReplayedBy != res.ID {
			t.Fatalf("mark = %+v", m)
		}
		if d := pttl(t, e, recordKey(dl)); d <= 30*day-time.Minute || d > 30*day {
			t.Fatalf("dead letter TTL after replay = %v, want the retention left", d)
		}
		if e.b.Mini == nil {
			return
		}
		e.b.Mini.FastForward(30*day - 2*time.Hour)
		if got := mustGet(t, s, dl); got.State != policy.DeadLettered {
			t.Fatalf("before the retention ends: %+v", got)
		}
		e.b.Mini.FastForward(2 * time.Hour)
		_, err = s.Get(ctxT(t), dl)
		wantErr(t, err, policy.ErrNotFound)
		e.clk.Advance(30 * day)
		if n, err := s.PruneDeadLetters(ctxT(t), "hist-api"); n != 1 || err != nil {
			t.Fatalf("prune = %d, %v", n, err)
		}
		if ok, _ := deadLettersOf(s).MarkReplayed(ctxT(t), dl, "x"); ok || e.b.Mini.Exists(recordKey(dl)) {
			t.Fatal("marking an expired dead letter recreated its record")
		}
	})
}

func TestMarkReplayedOnlyDeadLetters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ids := mustEnqueue(t, s, "mark-api", 1)
		if ok, err := deadLettersOf(s).MarkReplayed(ctxT(t), ids[0], "x"); ok || err != nil {
			t.Fatalf("mark of a scheduled callout = %v, %v", ok, err)
		}
		_, err := deadLettersOf(s).MarkReplayed(ctxT(t), "bad", "x")
		wantErr(t, err, policy.ErrNotFound)
		if m, err := deadLettersOf(s).ReplayMarkOf(ctxT(t), ids[0]); m.ReplayedBy != "" || err != nil {
			t.Fatalf("mark = %+v, %v", m, err)
		}
	})
}
