package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
)

// TestHeldIsTheRecordsState: held against scheduled is the state the
// record keeps (contract §12), written when the gate changes, never worked
// out again from the gate by a reader. The result that opens the breaker
// holds the callouts already waiting: one due before the reopening is due
// at it (code h), one whose backoff ends later keeps its time (code g);
// Get and the pending list say held. A hold that comes after the gate
// opened again changes nothing. The success of the probe that closes the
// breaker releases them: scheduled, the backoff one at its own time.
func TestHeldIsTheRecordsState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		const ep = "park-api"
		var soon []string // due in a minute, before the breaker's reopening
		for range 2 {
			res, err := s.Enqueue(ctxT(t), storetest.Req(ep, "", `{}`), policy.EnqueueOptions{DueAt: e.clk.Now().Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			soon = append(soon, res.ID)
		}
		last := openBreaker(t, e, s, ep, 20) // 20 callouts, each due again in an hour
		st := mustState(t, s, ep)
		if !last.Breaker.Opened || st.Gate.State != policy.GateBreakerOpen {
			t.Fatalf("after 20 failures: %+v, gate %s; want the breaker opened", last.Breaker, st.Gate.State)
		}
		reopen := st.ProbeAt
		code := func(id string) string {
			key, _ := keyspace.Callout(id)
			return e.b.Client.HGet(ctxT(t), key, record.FieldState).Val()
		}
		for _, id := range soon {
			if c := mustGet(t, s, id); code(id) != "h" || c.State != policy.Held || !c.NextAttemptAt.Equal(reopen) {
				t.Fatalf("waiting when the breaker opened: code %q state %s next %v, want h, held, due at the reopening %v",
					code(id), c.State, c.NextAttemptAt, reopen)
			}
		}
		backoff := mustPending(t, s, ep, policy.Held)
		if len(backoff) != 22 {
			t.Fatalf("%d held listed, want 22 (2 due soon, 20 in backoff)", len(backoff))
		}
		var later *policy.Callout
		for _, c := range backoff {
			if c.NextAttemptAt.After(reopen) {
				later = c
			}
		}
		if later == nil || code(later.ID) != "g" {
			t.Fatalf("a callout in its hour's backoff: %+v, want held at its own time (code g)", later)
		}
		if n := len(mustPending(t, s, ep, policy.Scheduled)); n != 0 {
			t.Fatalf("%d scheduled listed behind the open breaker, want 0", n)
		}

		// The probe at the reopening succeeds and closes the breaker.
		e.clk.Advance(reopen.Sub(e.clk.Now()))
		probe := mustClaim(t, s, ep, ClaimOptions{Batch: 1, Lease: testLease})
		if len(probe.Claimed) != 1 || probe.Claimed[0].Kind != policy.KindProbe {
			t.Fatalf("claim at the reopening = %+v, want one probe", probe)
		}
		if r := mustComplete(t, s, probe.Claimed[0], success()); !r.Breaker.Closed {
			t.Fatalf("the probe's success = %+v, want the breaker closed", r.Breaker)
		}
		// A hold after the gate opened again (a late one) changes nothing.
		if _, err := s.held.Hold(ctxT(t), ep, "", reopen.UnixMilli()); err != nil {
			t.Fatal(err)
		}
		for _, id := range soon {
			if c := mustGet(t, s, id); c.ID != probe.Claimed[0].ID && (c.State != policy.Scheduled || code(id) != "s") {
				t.Fatalf("after the breaker closed: %s (code %q), want scheduled", c.State, code(id))
			}
		}
		if c := mustGet(t, s, later.ID); c.State != policy.Scheduled || !c.NextAttemptAt.Equal(later.NextAttemptAt) {
			t.Fatalf("the backoff callout after the breaker closed: %s next %v, want scheduled at %v",
				c.State, c.NextAttemptAt, later.NextAttemptAt)
		}
		if n := len(mustPending(t, s, ep, policy.Held)); n != 0 {
			t.Fatalf("%d held listed after the breaker closed, want 0", n)
		}
	})
}

// mustPending lists endpoint's pending callouts in state (up to 100).
func mustPending(t *testing.T, s *Store, endpoint string, state policy.State) []*policy.Callout {
	t.Helper()
	cs, _, err := pendingOf(s).Pending(ctxT(t), endpoint, state, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestEndpointPauseHoldsEveryOrganisation: a 429's pause shuts the
// endpoint's own gate, which holds every organisation (contract §6) — also
// when it comes from an organisation whose own breaker partition was shut
// already (its gate went from shut to shut): the other organisation's
// waiting callouts are held, not listed scheduled, while the pause lasts.
func TestEndpointPauseHoldsEveryOrganisation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := partitionedStore(e)
		const ep = "pause-orgs-api"
		br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
		enqueueOf(t, s, ep, orgB, 3)
		a := []*policy.Claimed{mustBegin(t, s, reqOf(ep, orgA, "")), mustBegin(t, s, reqOf(ep, orgA, "")),
			mustBegin(t, s, reqOf(ep, orgA, ""))}
		mustComplete(t, s, a[0], failureUnder(e, br))
		if r := mustComplete(t, s, a[1], failureUnder(e, br)); !r.Breaker.Opened {
			t.Fatalf("org-a's second failure = %+v, want its partition opened", r.Breaker)
		}
		until := e.clk.Now().Add(30 * time.Second)
		mustComplete(t, s, a[2], policy.Completion{Breaker: br, Action: policy.ActionRetry,
			NextAttemptAt: e.clk.Now().Add(time.Second), PausedUntil: until,
			Attempt: &policy.Attempt{StartedAt: t0, Status: 429, Outcome: policy.Retryable, Error: "status_429"}})
		if sched := mustPending(t, s, ep, policy.Scheduled); len(sched) != 0 {
			t.Fatalf("%d listed scheduled during the endpoint's pause (first of %s), want 0", len(sched), sched[0].Issuer)
		}
		held := 0
		for _, c := range mustPending(t, s, ep, policy.Held) {
			if c.Issuer == orgB {
				held++
				if !c.NextAttemptAt.Equal(until) {
					t.Errorf("org-b's %s due at %v, want the pause's end %v", c.ID, c.NextAttemptAt, until)
				}
			}
		}
		if held != 3 {
			t.Fatalf("%d of org-b's callouts held, want its 3", held)
		}
	})
}

// TestHeldFollowTheReopening: a held callout is due at its gate's
// reopening, also when a later result moves the reopening: a second 429
// that lengthens the pause, a failed probe that reopens the breaker.
func TestHeldFollowTheReopening(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		const ep = "reopen-api"
		mustEnqueue(t, s, ep, 3)
		cl := mustClaim(t, s, ep, ClaimOptions{Batch: 2, Lease: testLease}).Claimed
		pause := func(c *policy.Claimed, d time.Duration) {
			mustComplete(t, s, c, policy.Completion{Action: policy.ActionRetry, NextAttemptAt: e.clk.Now().Add(time.Second),
				PausedUntil: e.clk.Now().Add(d),
				Attempt:     &policy.Attempt{StartedAt: t0, Status: 429, Outcome: policy.Retryable, Error: "status_429"}})
		}
		pause(cl[0], 3*time.Second)
		pause(cl[1], time.Minute) // the pause now ends a minute out
		for _, c := range mustPending(t, s, ep, policy.Held) {
			if !c.NextAttemptAt.Equal(e.clk.Now().Add(time.Minute)) {
				t.Errorf("held %s due at %v, want the pause's end %v", c.ID, c.NextAttemptAt, e.clk.Now().Add(time.Minute))
			}
		}

		const bp = "reprobe-api"
		res, err := s.Enqueue(ctxT(t), storetest.Req(bp, "", `{}`), policy.EnqueueOptions{DueAt: e.clk.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		openBreaker(t, e, s, bp, 20)
		e.clk.Advance(mustState(t, s, bp).ProbeAt.Sub(e.clk.Now()))
		probe := mustClaim(t, s, bp, ClaimOptions{Batch: 1, Lease: testLease}).Claimed
		if len(probe) != 1 || probe[0].Kind != policy.KindProbe {
			t.Fatalf("claim at the reopening = %+v, want one probe", probe)
		}
		mustComplete(t, s, probe[0], failure(e.clk.Now().Add(time.Hour)))
		reopen := mustState(t, s, bp).ProbeAt
		if !reopen.After(e.clk.Now()) {
			t.Fatalf("the breaker's next probe %v after the failed probe, want later than now", reopen)
		}
		if probe[0].ID != res.ID {
			if c := mustGet(t, s, res.ID); c.State != policy.Held || !c.NextAttemptAt.Equal(reopen) {
				t.Fatalf("after the failed probe: %s due %v, want held until the new reopening %v", c.State, c.NextAttemptAt, reopen)
			}
		}
	})
}
