package redisstore

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// The three organisations of these tests (JWT issuers).
const (
	orgA = "https://a.my.salesforce.com"
	orgB = "https://b.my.salesforce.com"
	orgC = "https://c.my.salesforce.com"
)

// partitionedStore is a store whose endpoints' breakers are partitioned by
// organisation (breaker.partition organisation, contract §6).
func partitionedStore(e *env) *Store {
	return e.storeWith(func(o *Options) { o.Partitioned = func(string) bool { return true } })
}

// reqOf is req of organisation org.
func reqOf(endpoint, org, key string) policy.NewCallout {
	nc := req(endpoint, key, "{}")
	nc.Issuer = org
	return nc
}

// enqueueOf enqueues n callouts of org due now.
func enqueueOf(t *testing.T, s *Store, endpoint, org string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Enqueue(ctxT(t), reqOf(endpoint, org, ""), enqOpts); err != nil {
			t.Fatalf("enqueue %d of %s: %v", i, org, err)
		}
	}
}

// byOrg counts claimed callouts by issuer.
func byOrg(cl []*policy.Claimed) map[string]int {
	n := map[string]int{}
	for _, c := range cl {
		n[c.Issuer]++
	}
	return n
}

// Fair dispatch (contract §10): org-a's backlog fills the endpoint's slots;
// org-b's callouts, due after all of org-a's, get the next slot that frees
// — one claim of one — and a shared batch is split between the two.
func TestOrganisationsClaimedFairly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		const ep = "fair-api"
		enqueueOf(t, s, ep, orgA, 300)
		busy := mustClaim(t, s, ep, ClaimOptions{Batch: 4, Lease: testLease})
		if n := byOrg(busy.Claimed)[orgA]; n != 4 {
			t.Fatalf("first claim: %v, want 4 of org-a", byOrg(busy.Claimed))
		}
		e.clk.Advance(time.Millisecond)
		enqueueOf(t, s, ep, orgB, 10)
		// one slot frees: it goes to org-b, whose callouts are behind 296
		// of org-a's in due order
		one := mustClaim(t, s, ep, ClaimOptions{Batch: 1, Lease: testLease})
		if got := byOrg(one.Claimed); got[orgB] != 1 || len(one.Claimed) != 1 {
			t.Fatalf("the freed slot went to %v, want org-b", got)
		}
		// org-b now has 1 in flight to org-a's 4: a batch of 5 gives org-b
		// the first 3 (levelling at 4), then alternates
		five := mustClaim(t, s, ep, ClaimOptions{Batch: 5, Lease: testLease})
		if got := byOrg(five.Claimed); got[orgB] != 4 || got[orgA] != 1 {
			t.Fatalf("a batch of 5 with 4 of org-a and 1 of org-b in flight = %v, want org-b 4, org-a 1", got)
		}
		if !five.MoreDue {
			t.Fatal("MoreDue false with 295 of org-a and 5 of org-b due")
		}
	})
}

// openPartition fails n callouts of org (threshold n) and returns the
// last completion's result.
func openPartition(t *testing.T, e *env, s *Store, ep, org string, n int, br policy.BreakerSettings) policy.CompleteResult {
	t.Helper()
	var last policy.CompleteResult
	for range n {
		cl := mustBegin(t, s, reqOf(ep, org, ""))
		last = mustComplete(t, s, cl, failureUnder(e, br))
	}
	return last
}

// beginOf writes nc (Begin) under breaker settings br and fails the test
// on an error.
func beginOf(t *testing.T, s *Store, nc policy.NewCallout, br policy.BreakerSettings) policy.BeginResult {
	t.Helper()
	r, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease, Breaker: br})
	if err != nil {
		t.Fatalf("begin %s of %s: %v", nc.IdempotencyKey, nc.Issuer, err)
	}
	return r
}

// beginHeld is beginOf, and fails the test unless the write was held;
// what names the write.
func beginHeld(t *testing.T, s *Store, nc policy.NewCallout, br policy.BreakerSettings, what string) {
	t.Helper()
	if r := beginOf(t, s, nc, br); r.Held == nil {
		t.Fatalf("%s = %+v; want held", what, r)
	}
}

// beginMade is beginOf, and fails the test unless the write was made at
// once; it returns its first attempt. what names the write.
func beginMade(t *testing.T, s *Store, nc policy.NewCallout, br policy.BreakerSettings, what string) *policy.Claimed {
	t.Helper()
	r := beginOf(t, s, nc, br)
	if r.Claimed == nil {
		t.Fatalf("%s = %+v; want its first attempt", what, r)
	}
	return r.Claimed
}

// failureUnder is failure, due in an hour, under breaker settings br.
func failureUnder(e *env, br policy.BreakerSettings) policy.Completion {
	f := failure(e.clk.Now().Add(time.Hour))
	f.Breaker = br
	return f
}

// wantEndpointBreaker fails the test unless ep's own breaker is want; when says
// at what point of the test.
func wantEndpointBreaker(t *testing.T, s *Store, ep string, want policy.BreakerState, when string) {
	t.Helper()
	if st := mustState(t, s, ep); st.Breaker != want {
		t.Fatalf("endpoint breaker %s %s, want %s", st.Breaker, when, want)
	}
}

// orgAFailed is a partitioned store (threshold 2, probe interval 1 min)
// where org-a's two failures opened its partition of ep.
func orgAFailed(t *testing.T, e *env, ep string) (*Store, policy.BreakerSettings) {
	t.Helper()
	s := partitionedStore(e)
	br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
	openPartition(t, e, s, ep, orgA, 2, br)
	return s, br
}

// Breaker partitions (contract §6): org-a's failures open org-a's breaker
// only — org-b's writes are made, not held, and its reads are admitted;
// a second organisation's open partition opens the endpoint's own breaker,
// which holds everybody; org-b's success ends the endpoint's outage (what
// auto-disable measures) though org-a's partition stays open.
func TestPartitionHoldsOnlyItsOrganisation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := partitionedStore(e)
		const ep = "shared-api"
		br := policy.BreakerSettings{Failures: 3, ProbeInterval: time.Minute}
		if r := openPartition(t, e, s, ep, orgA, 3, br); !r.Breaker.Opened || r.State != policy.Held ||
			r.Breaker.Partition != orgA {
			t.Fatalf("org-a's third failure = %+v, want its partition opened and the callout held", r)
		}
		st := mustState(t, s, ep)
		if st.Breaker != policy.BreakerClosed || st.Gate.State != policy.GateOpen {
			t.Fatalf("endpoint breaker %s gate %s after org-a's partition opened, want closed and open", st.Breaker, st.Gate.State)
		}
		if len(st.Partitions) != 1 || st.Partitions[0].Issuer != orgA || st.Partitions[0].Breaker != policy.BreakerOpen ||
			st.Partitions[0].ConsecutiveFailures != 3 {
			t.Fatalf("partitions = %+v, want org-a open with 3 failures", st.Partitions)
		}
		// org-a's new write is held; org-b's is made at once
		beginHeld(t, s, reqOf(ep, orgA, "a-new"), br, "org-a's write")
		rb := beginMade(t, s, reqOf(ep, orgB, "b-new"), br, "org-b's write")
		// the held list is org-a's: its retries and its new write
		held, _, err := pendingOf(s).Pending(ctxT(t), ep, policy.Held, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != 4 {
			t.Fatalf("held callouts: %d, want org-a's 3 retries and its new write", len(held))
		}
		for _, c := range held {
			if c.Issuer != orgA {
				t.Fatalf("held callout %s of %s, want org-a's only", c.ID, c.Issuer)
			}
		}
		// reads: org-a's refused, org-b's admitted
		adm := func(org string) policy.Admission {
			a, err := s.Admit(ctxT(t), keyspace.PartitionGate(ep, org), br.WithDefaults(testLease))
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		if g := adm(orgA).Gate; g.State != policy.GateBreakerOpen || g.Partition != orgA {
			t.Fatalf("org-a's read meets %+v, want breaker_open of its own partition", g)
		}
		if g := adm(orgB).Gate; g.State != policy.GateOpen || g.Partition != "" {
			t.Fatalf("org-b's read meets %+v, want open", g)
		}
		// org-b's success ends the endpoint's outage; org-a's partition stays
		s1 := success()
		s1.Breaker = br
		if r := mustComplete(t, s, rb, s1); !r.Breaker.OutageEnded {
			t.Fatalf("org-b's success = %+v, want the outage ended", r.Breaker)
		}
		if st := mustState(t, s, ep); !st.OutageStartedAt.IsZero() || st.Partitions[0].Breaker != policy.BreakerOpen {
			t.Fatalf("after org-b's success: outage %v, partitions %+v; want no outage, org-a still open", st.OutageStartedAt, st.Partitions)
		}
		// org-c's partition opens too: two open partitions, but org-b
		// succeeded within the probe interval, so the endpoint stays
		// closed and org-b's next write is made
		if r := openPartition(t, e, s, ep, orgC, 3, br); !r.Breaker.Opened || r.Breaker.Partition != orgC {
			t.Fatalf("org-c's third failure = %+v, want its partition opened", r.Breaker)
		}
		wantEndpointBreaker(t, s, ep, policy.BreakerClosed, "with org-b's success in the interval")
		beginMade(t, s, reqOf(ep, orgB, "b-served"), br, "org-b's write beside two open partitions")
		// an interval without a success: the half-open partitions' probes
		// fail, two live open partitions open the endpoint's own breaker,
		// which holds org-b's further writes as well
		e.clk.Advance(br.ProbeInterval + time.Second)
		openPartition(t, e, s, ep, orgA, 1, br)
		openPartition(t, e, s, ep, orgC, 1, br)
		wantEndpointBreaker(t, s, ep, policy.BreakerOpen, "after an interval without a success")
		beginHeld(t, s, reqOf(ep, orgB, "b-held"), br, "org-b's write with the endpoint's breaker open")
		// an admin's reset closes every breaker, the partitions' too
		if err := s.ResetBreaker(ctxT(t), ep); err != nil {
			t.Fatal(err)
		}
		if st := mustState(t, s, ep); st.Breaker != policy.BreakerClosed || len(st.Partitions) != 0 {
			t.Fatalf("after a reset: breaker %s, partitions %+v; want closed and none", st.Breaker, st.Partitions)
		}
	})
}

// A half-open partition's single probe is one of its own organisation's
// callouts (contract §6 "probes are taken from the partition they test"),
// exactly one, while the other organisations' callouts go on.
func TestPartitionProbeIsItsOwn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const ep = "probe-part-api"
		s, br := orgAFailed(t, e, ep)
		e.clk.Advance(time.Hour + time.Second) // the retries are due, the partition half-open
		enqueueOf(t, s, ep, orgB, 3)
		opts := ClaimOptions{Batch: 10, Lease: testLease, Breaker: br}
		r := mustClaim(t, s, ep, opts)
		probes, b := 0, 0
		for _, c := range r.Claimed {
			switch {
			case c.Issuer == orgA && c.Kind == policy.KindProbe:
				probes++
			case c.Issuer == orgB && c.Kind != policy.KindProbe:
				b++
			default:
				t.Fatalf("claimed %s of %s", c.Kind, c.Issuer)
			}
		}
		if probes != 1 || b != 3 {
			t.Fatalf("claimed %d probes of org-a and %d of org-b, want 1 and 3", probes, b)
		}
		if again := mustClaim(t, s, ep, opts); len(again.Claimed) != 0 {
			t.Fatalf("a second claim while org-a's probe is out got %d", len(again.Claimed))
		}
	})
}

// The fair claim's Redis cost (contract §10 "Fair dispatch", the hot
// path's budget): a claim of 20 due callouts spread over 1 and over 3
// organisations, by INFO commandstats on the real single node. Every
// organisation queue costs three pipelined commands (its due ids, earliest
// lease, count in flight) and one gate read in claim.lua; the claim stays
// two round trips, and at most 4 commands per attempt with 3
// organisations (one endpoint: 3.40).
func TestFairClaimCommandBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" {
			t.Skip("INFO commandstats is read on the real single node")
		}
		s := e.store()
		orgs := []string{orgA, orgB, orgC}
		for _, n := range []int{1, 3} {
			ep := "claim-budget-" + string(rune('0'+n))
			for i := range 200 {
				enqueueOf(t, s, ep, orgs[i%n], 1)
			}
			mustClaim(t, s, ep, ClaimOptions{Batch: 20, Lease: testLease}) // warm: the queues known
			claimed := 0
			per, by := budget(t, e, 5, func(int) {
				claimed += len(mustClaim(t, s, ep, ClaimOptions{Batch: 20, Lease: testLease}).Claimed)
			})
			if claimed != 100 {
				t.Fatalf("%d organisations: claimed %d in 5 claims of 20, want 100", n, claimed)
			}
			t.Logf("%d organisation(s): claim of 20 %.2f commands (%s), %.2f per attempt", n, per, by, per/20)
			if per/20 > 4 {
				t.Errorf("%d organisations: %.2f commands per attempt, want at most 4", n, per/20)
			}
		}
	})
}

// A claim after a breaker partition shut reports the endpoint's gate open
// (the dispatcher keeps claiming for the other organisations), no more due
// work from it (no busy round: the partition's callouts are held until it
// reopens), and when to look again (its reopening).
func TestShutPartitionIsNoReasonForAnotherRound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := partitionedStore(e)
		const ep = "shut-part-api"
		br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
		enqueueOf(t, s, ep, orgA, 10) // due now, before the partition opens
		openPartition(t, e, s, ep, orgA, 2, br)
		r := mustClaim(t, s, ep, ClaimOptions{Batch: 5, Lease: testLease, Breaker: br})
		if len(r.Claimed) != 0 || r.MoreDue || r.Gate.State != policy.GateOpen {
			t.Fatalf("claim with org-a's partition open: %d claimed, MoreDue %v, gate %s; want none, false, open",
				len(r.Claimed), r.MoreDue, r.Gate.State)
		}
		if !r.NextDueAt.After(e.clk.Now()) || r.NextDueAt.After(e.clk.Now().Add(br.ProbeInterval)) {
			t.Fatalf("NextDueAt %v, want the partition's reopening, within %s", r.NextDueAt, br.ProbeInterval)
		}
		enqueueOf(t, s, ep, orgB, 1)
		if r := mustClaim(t, s, ep, ClaimOptions{Batch: 5, Lease: testLease, Breaker: br}); len(r.Claimed) != 1 ||
			r.Claimed[0].Issuer != orgB {
			t.Fatalf("claim: %v, want org-b's one callout", byOrg(r.Claimed))
		}
	})
}

// Partitions on a sharded endpoint (keyspace "Shards and queues"): the
// queues outside the endpoint hash's slot act on the gate of their
// organisation's partition, and a half-open partition still has exactly
// one probe across the endpoint's queues.
func TestShardedPartitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const ep = "sharded-part-api"
		s := e.storeWith(func(o *Options) {
			o.Rand = storetest.Rand(7)
			o.Shards = func(string) int { return 3 }
			o.Partitioned = func(string) bool { return true }
		})
		br := policy.BreakerSettings{Failures: 3, ProbeInterval: time.Minute}
		opts := ClaimOptions{Batch: 50, Lease: testLease, Breaker: br}
		for i := range 3 {
			cl := mustBegin(t, s, reqOf(ep, orgA, "a-"+string(rune('0'+i))))
			mustComplete(t, s, cl, failureUnder(e, br))
		}
		if st := mustState(t, s, ep); st.Breaker != policy.BreakerClosed || len(st.Partitions) != 1 ||
			st.Partitions[0].Breaker != policy.BreakerOpen {
			t.Fatalf("after org-a's 3 failures: breaker %s, partitions %+v; want closed, org-a open", st.Breaker, st.Partitions)
		}
		e.clk.Advance(gateview.TTL + time.Millisecond)
		enqueueOf(t, s, ep, orgA, 12)
		enqueueOf(t, s, ep, orgB, 12)
		r := mustClaim(t, s, ep, opts)
		if got := byOrg(r.Claimed); got[orgA] != 0 || got[orgB] != 12 {
			t.Fatalf("claim with org-a's partition open = %v, want org-b's 12 only", got)
		}
		// half-open: one probe of org-a's in all the queues
		e.clk.Advance(time.Hour + time.Second)
		probes := 0
		for range 3 {
			for _, c := range mustClaim(t, s, ep, opts).Claimed {
				if c.Issuer != orgA || c.Kind != policy.KindProbe {
					t.Fatalf("claimed %s of %s while org-a's partition is half-open", c.Kind, c.Issuer)
				}
				probes++
			}
			e.clk.Advance(gateview.TTL + time.Millisecond)
		}
		if probes != 1 {
			t.Fatalf("%d probes of org-a's half-open partition, want exactly 1", probes)
		}
	})
}

// Where one organisation alone may call an endpoint (OpenPartitions 1),
// its partition opening opens the endpoint's own breaker too: the
// endpoint's state says what that organisation meets.
func TestOneOrganisationOpensTheEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.storeWith(func(o *Options) {
			o.Rand = storetest.Rand(9)
			o.Partitioned = func(string) bool { return true }
			o.OpenPartitions = func(string) int { return 1 }
		})
		const ep = "one-org-api"
		openPartition(t, e, s, ep, orgA, 2, policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute})
		if st := mustState(t, s, ep); st.Breaker != policy.BreakerOpen || st.Gate.State != policy.GateBreakerOpen {
			t.Fatalf("breaker %s, gate %s after the one organisation's partition opened; want open, breaker_open",
				st.Breaker, st.Gate.State)
		}
	})
}

// An open partition counts toward the endpoint's breaker only while it is
// live (contract §6, docs/limits.md): its last counting failure at most one
// probe interval ago. org-a failed, then stopped calling: ten intervals
// later org-b's partition opening is one live partition, not two, and the
// endpoint stays open to org-c. Once org-a fails its probe again it is live
// again, and the two open partitions open the endpoint's breaker.
func TestStalePartitionDoesNotOpenTheEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := partitionedStore(e)
		const ep = "stale-api"
		br := policy.BreakerSettings{Failures: 3, ProbeInterval: time.Minute}
		openPartition(t, e, s, ep, orgA, 3, br)
		e.clk.Advance(10 * time.Minute)
		if r := openPartition(t, e, s, ep, orgB, 3, br); !r.Breaker.Opened || r.Breaker.Partition != orgB {
			t.Fatalf("org-b's third failure = %+v, want its partition opened", r)
		}
		wantEndpointBreaker(t, s, ep, policy.BreakerClosed, "with org-a's partition stale for 10 intervals")
		beginMade(t, s, reqOf(ep, orgC, "c-new"), br, "org-c's write")
		// org-a calls again: its half-open partition's probe fails
		if r := openPartition(t, e, s, ep, orgA, 1, br); r.Breaker.Partition != orgA {
			t.Fatalf("org-a's probe = %+v, want a result of its partition", r)
		}
		wantEndpointBreaker(t, s, ep, policy.BreakerOpen, "with org-a's and org-b's partitions open and live")
	})
}

// Probes are taken from the partition they test (contract §6): with the
// endpoint's breaker half-open, org-a's partition still open and org-b's
// half-open, a claim over all three organisations' due callouts takes
// exactly two probes: the endpoint's, org-c's (its partition is closed),
// and org-b's partition's own, one of org-b's; org-a's queue is held by
// its own partition. Before the claim, org-a's new write is held (it does
// not take the endpoint's probe); once both probes are out nobody else is
// claimed. org-b's probe failing reopens org-b's partition only: the
// endpoint stays half-open, its probe org-c's.
func TestProbesAreTakenFromThePartitionTheyTest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := partitionedStore(e)
		const ep = "probe-ep-api"
		br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
		openPartition(t, e, s, ep, orgA, 2, policy.BreakerSettings{Failures: 2, ProbeInterval: 10 * time.Minute})
		e.clk.Advance(10 * time.Second)
		openPartition(t, e, s, ep, orgB, 2, br)
		wantEndpointBreaker(t, s, ep, policy.BreakerOpen, "with two partitions open and no success ever")
		e.clk.Advance(2 * time.Minute) // the endpoint and org-b half-open; org-a open for 8 more minutes
		for _, org := range []string{orgA, orgB, orgC} {
			enqueueOf(t, s, ep, org, 2)
		}
		beginHeld(t, s, reqOf(ep, orgA, "a-new"), br, "org-a's write (its own open partition holds it, it does not take the endpoint's probe)")
		opts := ClaimOptions{Batch: 10, Lease: testLease, Breaker: br}
		r := mustClaim(t, s, ep, opts)
		got := map[string]int{}
		var probeB *policy.Claimed
		for _, c := range r.Claimed {
			got[string(c.Kind)+" of "+c.Issuer]++
			if c.Issuer == orgB {
				probeB = c
			}
		}
		if len(r.Claimed) != 2 || got["probe of "+orgC] != 1 || got["probe of "+orgB] != 1 {
			t.Fatalf("claimed %v, want one probe of org-c (the endpoint's) and one of org-b (its partition's)", got)
		}
		if again := mustClaim(t, s, ep, opts); len(again.Claimed) != 0 {
			t.Fatalf("a second claim while both probes are out got %d", len(again.Claimed))
		}
		if res := mustComplete(t, s, probeB, failureUnder(e, br)); res.Breaker.Partition != orgB {
			t.Fatalf("org-b's failed probe = %+v, want a result of its partition", res.Breaker)
		}
		st := mustState(t, s, ep)
		if st.Breaker != policy.BreakerHalfOpen || !st.ProbeOut {
			t.Fatalf("endpoint breaker %s (probe out %v) after org-b's partition probe failed, want still half-open with org-c's probe out",
				st.Breaker, st.ProbeOut)
		}
	})
}

// Two failing organisations never hold a third that the upstream answers
// (contract §6): org-a's and org-c's partitions open, and with no success
// ever the endpoint's breaker opens too; once half-open its probe is
// org-b's held callout, whose success closes it. From then on org-a's
// and org-c's partition probes fail every interval (each one 1 ms after
// org-b's success), and yet the endpoint stays closed and every write of
// org-b is made at once, round after round; each org-b success ends the
// outage, so the endpoint's outage (what auto-disable measures) never
// outlives one interval.
func TestTwoFailingOrganisationsNeverHoldAThird(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := partitionedStore(e)
		const ep = "two-failing-api"
		br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
		openPartition(t, e, s, ep, orgA, 2, br)
		openPartition(t, e, s, ep, orgC, 2, br)
		wantEndpointBreaker(t, s, ep, policy.BreakerOpen, "with two partitions open and no success ever")
		beginHeld(t, s, reqOf(ep, orgB, "b-held"), br, "org-b's write with the endpoint's breaker open")
		e.clk.Advance(br.ProbeInterval + time.Second)
		cl := mustClaim(t, s, ep, ClaimOptions{Batch: 10, Lease: testLease, Breaker: br})
		if len(cl.Claimed) != 1 || cl.Claimed[0].Issuer != orgB || cl.Claimed[0].Kind != policy.KindProbe {
			t.Fatalf("claimed %d (%+v), want org-b's held callout as the endpoint's probe", len(cl.Claimed), cl.Claimed)
		}
		ok := success()
		ok.Breaker = br
		if r := mustComplete(t, s, cl.Claimed[0], ok); !r.Breaker.Closed {
			t.Fatalf("org-b's probe succeeding = %+v, want the endpoint's breaker closed", r.Breaker)
		}
		for round := range 5 {
			e.clk.Advance(time.Millisecond)
			openPartition(t, e, s, ep, orgA, 1, br) // the half-open partitions' probes fail
			openPartition(t, e, s, ep, orgC, 1, br)
			st := mustState(t, s, ep)
			if st.Breaker != policy.BreakerClosed || len(st.Partitions) != 2 {
				t.Fatalf("round %d: endpoint breaker %s, partitions %+v; want closed beside org-a's and org-c's open partitions",
					round, st.Breaker, st.Partitions)
			}
			e.clk.Advance(br.ProbeInterval - time.Second)
			rb := beginMade(t, s, reqOf(ep, orgB, ""), br, fmt.Sprintf("round %d: org-b's write", round))
			mustComplete(t, s, rb, ok)
			if st := mustState(t, s, ep); !st.OutageStartedAt.IsZero() {
				t.Fatalf("round %d: outage since %v after org-b's success, want none", round, st.OutageStartedAt)
			}
			e.clk.Advance(time.Second) // org-a's and org-c's partitions half-open again
		}
	})
}

// A success while nothing fails writes nothing but the last success, and
// that at most once per half probe interval (ARCHITECTURE.md: a success
// costs no write when nothing is failing), so the veto of the endpoint's
// breaker sees it: org-b's quiet successes, the last a second before
// org-a's and org-c's partitions open, keep the endpoint closed. The same
// on an endpoint of 3 shards, whose queues outside the endpoint hash's
// slot record a success from Go (breakerCall) by the gate view's last
// success.
func TestQuietSuccessKeepsTheEndpointClosed(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(strconv.Itoa(shards)+" shards", func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, e *env) {
				s := e.storeWith(func(o *Options) {
					o.Rand = storetest.Rand(9)
					o.Shards = func(string) int { return shards }
					o.Partitioned = func(string) bool { return true }
				})
				const ep = "quiet-api"
				br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
				ok := success()
				ok.Breaker = br
				var lsu []time.Time
				for i := range 4 { // 0 s, 20 s, 40 s, 60 s: written at 0 s and 40 s
					if i > 0 {
						e.clk.Advance(20 * time.Second)
					}
					rb := mustBegin(t, s, reqOf(ep, orgB, "b-"+strconv.Itoa(i)))
					mustComplete(t, s, rb, ok)
					lsu = append(lsu, mustState(t, s, ep).LastSuccessAt)
				}
				if !lsu[0].Equal(t0) || !lsu[1].Equal(t0) || !lsu[2].Equal(t0.Add(40*time.Second)) || !lsu[3].Equal(lsu[2]) {
					t.Fatalf("last success after each quiet success = %v, want t0, t0, t0+40s, t0+40s", lsu)
				}
				e.clk.Advance(time.Second)
				openPartition(t, e, s, ep, orgA, 2, br)
				openPartition(t, e, s, ep, orgC, 2, br)
				wantEndpointBreaker(t, s, ep, policy.BreakerClosed, "a second after org-b's last success")
			})
		})
	}
}

// ReadGates names the partition a gate is (policy.Gate.Partition, the
// status document's held_by level, contract §12): org-a's open partition
// is org-a's; org-b, whose partition is closed, meets the endpoint's open
// gate; once two partitions open the endpoint's breaker, org-c meets it.
func TestReadGatesNamesThePartition(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const ep = "held-by-api"
		s, br := orgAFailed(t, e, ep)
		names := []string{keyspace.PartitionGate(ep, orgA), keyspace.PartitionGate(ep, orgB), keyspace.PartitionGate(ep, orgC)}
		gates, errs := s.ReadGates(ctxT(t), names)
		if errs[0] != nil || gates[0].Gate.State != policy.GateBreakerOpen || gates[0].Gate.Partition != orgA ||
			gates[1].Gate.State != policy.GateOpen || gates[1].Gate.Partition != "" {
			t.Fatalf("gates %+v (%v), want org-a's partition breaker_open, org-b open", gates, errs)
		}
		openPartition(t, e, s, ep, orgB, 2, br)
		gates, errs = s.ReadGates(ctxT(t), names)
		if errs[2] != nil || gates[2].Gate.State != policy.GateBreakerOpen || gates[2].Gate.Partition != "" {
			t.Fatalf("org-c's gate %+v (%v), want the endpoint's breaker_open", gates[2], errs[2])
		}
	})
}
