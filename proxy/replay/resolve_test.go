package replay

import (
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// TestResolutionFollowsTheChain: the listing says what became of each
// dead letter's replays — never replayed, pending, succeeded, failed again,
// and failed then replayed again with success (the chain followed) — and
// Unresolved keeps all but the succeeded ones. Callout reports the same
// resolution in the replay mark.
func TestResolutionFollowsTheChain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		ctx := ctxT(t)
		d := e.seedN(t, "pay-api", "r", 5, time.Millisecond)
		ids := map[string]string{}
		for i := 1; i < 5; i++ {
			id, err := s.ReplayOne(ctx, d[i].ID, "ops")
			if err != nil {
				t.Fatal(err)
			}
			ids[d[i].ID] = id
		}
		// Finish the chains: r-2 succeeds, r-3 and r-4 dead-letter; r-1 stays pending.
		e.finishChains(t, "pay-api", map[string]policy.State{ids[d[2].ID]: policy.Succeeded,
			ids[d[3].ID]: policy.DeadLettered, ids[d[4].ID]: policy.DeadLettered})
		// r-4's failed chain is replayed in turn, and succeeds.
		again, err := s.ReplayOne(ctx, ids[d[4].ID], "ops")
		if err != nil {
			t.Fatal(err)
		}
		e.finishChains(t, "pay-api", map[string]policy.State{again: policy.Succeeded})

		want := map[string]policy.Resolution{d[0].ID: "", d[1].ID: policy.ResolutionPending,
			d[2].ID: policy.ResolutionSucceeded, d[3].ID: policy.ResolutionFailedAgain,
			d[4].ID:      policy.ResolutionSucceeded,
			ids[d[3].ID]: "", ids[d[4].ID]: policy.ResolutionSucceeded}
		page, err := s.DeadLetters(ctx, Query{Filter: Filter{Endpoints: []string{"pay-api"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != len(want) {
			t.Fatalf("%d dead letters listed, want %d", len(page.Items), len(want))
		}
		for _, it := range page.Items {
			if it.Resolution != want[it.ID] {
				t.Errorf("%s: resolution %q, want %q", it.ID, it.Resolution, want[it.ID])
			}
			if _, m, err := s.Callout(ctx, it.ID); err != nil || m.Resolution != want[it.ID] {
				t.Errorf("%s: Callout's mark %+v (%v), want %q", it.ID, m, err, want[it.ID])
			}
		}
		page, err = s.DeadLetters(ctx, Query{Filter: Filter{Endpoints: []string{"pay-api"}, Unresolved: true}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		wantIDs := []string{d[0].ID, d[1].ID, d[3].ID, ids[d[3].ID]}
		slices.Sort(got)
		slices.Sort(wantIDs)
		if !slices.Equal(got, wantIDs) {
			t.Fatalf("unresolved = %v, want %v", got, wantIDs)
		}
	})
}

// finishChains claims endpoint's due callouts and completes those named in
// ends as given (succeeded or dead-lettered); others are put back.
func (e *testEnv) finishChains(t *testing.T, endpoint string, ends map[string]policy.State) {
	t.Helper()
	cr, err := e.store.Claim(ctxT(t), endpoint, redisstore.ClaimOptions{Batch: 100, Lease: testLease})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cr.Claimed {
		comp := policy.Completion{Action: policy.ActionRetry, NextAttemptAt: e.clk.Now(),
			Attempt: &policy.Attempt{StartedAt: e.clk.Now(), Status: 503, Outcome: policy.Retryable}}
		switch ends[cl.ID] {
		case policy.Succeeded:
			comp = policy.Completion{Action: policy.ActionSucceed,
				Attempt:  &policy.Attempt{StartedAt: e.clk.Now(), Status: 200, Outcome: policy.Success},
				Response: &policy.Response{Status: 200, Body: []byte("ok")}}
		case policy.DeadLettered:
			comp = policy.Completion{Action: policy.ActionDeadLetter, Reason: policy.DeadLetterPermanent, Error: "again",
				Attempt: &policy.Attempt{StartedAt: e.clk.Now(), Status: 400, Outcome: policy.Permanent}}
		}
		if _, err := e.store.Complete(ctxT(t), cl, comp); err != nil {
			t.Fatal(err)
		}
	}
}
