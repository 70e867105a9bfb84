package redisstore

import (
	"testing"
	"time"
)

// A claim under OrgCap (contract §10 "Fair dispatch"): with org-a at its
// cap (the dispatcher's 15 of 16 slots in flight) the kept slot claims none
// of org-a's 300 due callouts and reports no more due (so the dispatcher
// does not spin on it); once org-b's callouts are due the same claim gives
// the slot to org-b; with room left, the running organisations together
// take only up to the cap (15 minus the 13 in flight), the kept slot not
// theirs.
func TestClaimKeepsASlotForOtherOrganisations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		const ep = "orgcap-api"
		enqueueOf(t, s, ep, orgA, 300)
		capped := ClaimOptions{Batch: 1, Lease: testLease, OrgCap: 15, OrgInFlight: map[string]int{orgA: 15}}
		if r := mustClaim(t, s, ep, capped); len(r.Claimed) != 0 || r.MoreDue {
			t.Fatalf("the kept slot with only org-a due: claimed %v, more due %v; want none, false", byOrg(r.Claimed), r.MoreDue)
		}
		e.clk.Advance(time.Millisecond)
		enqueueOf(t, s, ep, orgB, 10)
		if r := mustClaim(t, s, ep, capped); len(r.Claimed) != 1 || r.Claimed[0].Issuer != orgB {
			t.Fatalf("the kept slot with org-b due: claimed %v, want one of org-b", byOrg(r.Claimed))
		}
		some := ClaimOptions{Batch: 10, Lease: testLease, OrgCap: 15, OrgInFlight: map[string]int{orgA: 12, orgB: 1}}
		if r := mustClaim(t, s, ep, some); len(r.Claimed) != 2 || r.MoreDue {
			t.Fatalf("a batch of 10 with org-a 12 and org-b 1 in flight (cap 15) = %v, more due %v; want 2 in all, false",
				byOrg(r.Claimed), r.MoreDue)
		}
	})
}
