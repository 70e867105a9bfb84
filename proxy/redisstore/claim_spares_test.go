package redisstore

import (
	"testing"
)

// Two replicas that read the same first due ids at the same time: the one
// that claims second still fills its batch from the spare candidates its
// read kept (claim.lua stops at the batch), and no callout is claimed twice.
func TestClaimSparesFillBatchAfterARace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, b := e.store(), e.store()
		mustEnqueue(t, a, "spare-api", 10)
		req := []ClaimRequest{{Endpoint: "spare-api", ClaimOptions: ClaimOptions{Batch: 4, Lease: testLease}}}
		now := e.clk.Now()
		// b reads its candidates first (the first 8 due: 4 and 4 spares) ...
		plans, _, err := b.candidates(ctxT(t), req, now)
		if err != nil {
			t.Fatal(err)
		}
		allot(plans, req, 0)
		// ... then a claims the first 4 of them ...
		first := mustClaim(t, a, "spare-api", ClaimOptions{Batch: 4, Lease: testLease}).Claimed
		if len(first) != 4 {
			t.Fatalf("a claimed %d, want 4", len(first))
		}
		// ... and b's claim, on its stale read, still gets 4, none of a's.
		out := make([]ClaimResult, 1)
		if err := b.claimPlans(ctxT(t), req, plans, out, now); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, c := range first {
			seen[c.ID] = true
		}
		if len(out[0].Claimed) != 4 {
			t.Fatalf("b claimed %d after the race, want its batch of 4 from the spares", len(out[0].Claimed))
		}
		for _, c := range out[0].Claimed {
			if seen[c.ID] {
				t.Fatalf("callout %s claimed by both replicas", c.ID)
			}
			seen[c.ID] = true
		}
		// b's read saw 8 due and it claimed 4: more may be due (MoreDue).
		if !out[0].MoreDue {
			t.Fatal("MoreDue false after a claim that saw more due than it got")
		}
		// The two left are still due, for the next claim, which sees no more.
		rest := mustClaim(t, a, "spare-api", claimOpts)
		if len(rest.Claimed) != 2 || rest.MoreDue {
			t.Fatalf("%d left to claim (MoreDue %v), want 2 and no more", len(rest.Claimed), rest.MoreDue)
		}
	})
}
