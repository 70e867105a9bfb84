package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

func TestBreakerCounting(t *testing.T) {
	tests := []struct {
		name       string
		counts     bool
		n          int
		wantOpen   bool
		wantFailed int
	}{
		{"20 counting failures open it", true, 20, true, 20},
		{"19 counting failures do not", true, 19, false, 19},
		{"429-style failures never count", false, 25, false, 0},
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := e.store()
				ep := fmt.Sprintf("count-api-%d", i)
				var last policy.CompleteResult
				for range tt.n {
					mustEnqueue(t, s, ep, 1)
					c := mustClaim(t, s, ep, claimOpts).Claimed[0]
					comp := failure(e.clk.Now().Add(time.Hour))
					comp.CountsTowardBreaker = tt.counts
					last = mustComplete(t, s, c, comp)
				}
				st := mustState(t, s, ep)
				if (st.Breaker == policy.BreakerOpen) != tt.wantOpen || last.Breaker.Opened != tt.wantOpen ||
					st.ConsecutiveFailures != tt.wantFailed {
					t.Fatalf("state = %+v, last = %+v", st, last)
				}
				if tt.wantOpen && (!st.OpenedAt.Equal(e.clk.Now()) || !st.ProbeAt.Equal(e.clk.Now().Add(5*time.Minute)) ||
					last.State != policy.Held || st.Gate.State != policy.GateBreakerOpen) {
					t.Fatalf("open state = %+v, last = %+v", st, last)
				}
			})
		}
	})
}

func TestBreakerSuccessResets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		first := openBreaker(t, e, s, "reset-api", 1)
		if !first.Breaker.OutageBegan || !first.Breaker.OutageStartedAt.Equal(t0) {
			t.Fatalf("first failure = %+v, want an outage begun", first)
		}
		openBreaker(t, e, s, "reset-api", 18)
		mustEnqueue(t, s, "reset-api", 1)
		e.clk.Advance(time.Second)
		c := mustClaim(t, s, "reset-api", claimOpts).Claimed
		r := mustComplete(t, s, c[len(c)-1], success())
		if !r.Breaker.OutageEnded || r.Breaker.ConsecutiveFailures != 0 || r.Breaker.Closed {
			t.Fatalf("success = %+v, want outage ended, count 0", r)
		}
		st := mustState(t, s, "reset-api")
		if st.ConsecutiveFailures != 0 || !st.LastSuccessAt.Equal(e.clk.Now()) || !st.OutageStartedAt.IsZero() {
			t.Fatalf("state after success = %+v", st)
		}
		if last := openBreaker(t, e, s, "reset-api", 19); last.Breaker.Opened || last.Breaker.ConsecutiveFailures != 19 {
			t.Fatalf("19 failures after a success = %+v, want still closed", last)
		}
	})
}

// TestBreakerOpensOnceAtThreshold: two completions race at the threshold;
// exactly one opens the breaker and opened_at is the opener's time.
func TestBreakerOpensOnceAtThreshold(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		openBreaker(t, e, s, "race-api", 19)
		mustEnqueue(t, s, "race-api", 3)
		cl := mustClaim(t, s, "race-api", claimOpts).Claimed
		opener := mustComplete(t, s, cl[0], failure(e.clk.Now().Add(time.Hour)))
		openedAt := e.clk.Now()
		e.clk.Advance(time.Second)
		late := mustComplete(t, s, cl[1], failure(e.clk.Now().Add(time.Hour)))
		if !opener.Breaker.Opened || late.Breaker.Opened || late.Breaker.ConsecutiveFailures != 21 {
			t.Fatalf("opener = %+v, late = %+v", opener, late)
		}
		if st := mustState(t, s, "race-api"); !st.OpenedAt.Equal(openedAt) || !st.ProbeAt.Equal(openedAt.Add(5*time.Minute)) {
			t.Fatalf("opened_at/probe_at = %v/%v, want written once at %v", st.OpenedAt, st.ProbeAt, openedAt)
		}
		if !e.b.Real() {
			return
		}
		// Concurrently, on a fresh endpoint: N workers at the threshold at once.
		openBreaker(t, e, s, "race2-api", 15)
		mustEnqueue(t, s, "race2-api", 10)
		claimed := mustClaim(t, s, "race2-api", claimOpts).Claimed
		results := concurrently(t, len(claimed), func(i int) (policy.CompleteResult, error) {
			return e.store().Complete(ctxT(t), claimed[i], failure(e.clk.Now().Add(time.Hour)))
		})
		opened := 0
		for _, r := range results {
			if r.Breaker.Opened {
				opened++
			}
		}
		if opened != 1 {
			t.Fatalf("%d concurrent completions opened the breaker, want 1", opened)
		}
	})
}

func TestProbeTakenByExactlyOneClaimer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		openBreaker(t, e, s, "probe-api", 20)
		mustEnqueue(t, s, "probe-api", 5)
		e.clk.Advance(5 * time.Minute)

		var probes []*policy.Claimed
		for _, r := range claimConcurrently(t, e, "probe-api", 8) {
			for _, c := range r.Claimed {
				probes = append(probes, c)
			}
			if len(r.Claimed) == 0 && r.Gate.State != policy.GateProbing {
				t.Fatalf("loser gate = %+v, want probing", r.Gate)
			}
		}
		if len(probes) != 1 || probes[0].Kind != policy.KindProbe {
			t.Fatalf("probes = %+v, want exactly one of kind probe", probes)
		}
		st := mustState(t, s, "probe-api")
		if st.Breaker != policy.BreakerHalfOpen || !st.ProbeOut {
			t.Fatalf("state = %+v, want half_open with the probe out", st)
		}

		// The probe fails: open again for another interval; opened_at kept.
		e.clk.Advance(time.Second)
		r := mustComplete(t, s, probes[0], failure(e.clk.Now().Add(time.Minute)))
		if !r.Breaker.Probe || r.State != policy.Held || r.Breaker.Opened {
			t.Fatalf("failed probe = %+v", r)
		}
		st = mustState(t, s, "probe-api")
		if st.Breaker != policy.BreakerOpen || !st.ProbeAt.Equal(e.clk.Now().Add(5*time.Minute)) || st.ProbeOut || !st.OpenedAt.Equal(t0) {
			t.Fatalf("after failed probe = %+v", st)
		}
		// the held callouts wait for the new reopening: nothing is due before
		if got := mustClaim(t, s, "probe-api", claimOpts); len(got.Claimed) != 0 || !got.NextDueAt.Equal(st.ProbeAt) {
			t.Fatalf("claim after failed probe = %+v, want none, next due at the new reopening %v", got, st.ProbeAt)
		}

		// A successful probe closes it and the backlog flows again.
		e.clk.Advance(5 * time.Minute)
		p := mustClaim(t, s, "probe-api", claimOpts).Claimed
		if len(p) != 1 || p[0].Kind != policy.KindProbe {
			t.Fatalf("second probe = %+v", p)
		}
		if r := mustComplete(t, s, p[0], success()); !r.Breaker.Closed || !r.Breaker.Probe || !r.Breaker.OutageEnded {
			t.Fatalf("successful probe = %+v", r)
		}
		if got := mustClaim(t, s, "probe-api", claimOpts); len(got.Claimed) != 4 || got.Gate.State != policy.GateOpen {
			t.Fatalf("claim after close = %d, gate %+v", len(got.Claimed), got.Gate)
		}
	})
}

func TestDeadProberTokenExpires(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		openBreaker(t, e, s, "dead-probe-api", 20)
		mustEnqueue(t, s, "dead-probe-api", 2)
		e.clk.Advance(5 * time.Minute)
		opts := ClaimOptions{Batch: 10, Lease: testLease, Breaker: policy.BreakerSettings{ProbeLease: 10 * time.Second}}
		dead := mustClaim(t, s, "dead-probe-api", opts).Claimed
		if len(dead) != 1 {
			t.Fatalf("first probe = %+v", dead)
		}
		e.clk.Advance(9 * time.Second)
		if got := mustClaim(t, s, "dead-probe-api", opts); len(got.Claimed) != 0 || got.Gate.State != policy.GateProbing {
			t.Fatalf("claim while the probe token is held = %+v", got)
		}
		e.clk.Advance(time.Second)
		next := mustClaim(t, s, "dead-probe-api", opts).Claimed
		if len(next) != 1 || next[0].Kind != policy.KindProbe || next[0].ID == dead[0].ID {
			t.Fatalf("probe after the token expired = %+v", next)
		}
		// The dead prober's lease expires too; reaping it must not release
		// the new prober's token.
		e.clk.Advance(testLease)
		if ids, _ := s.Reap(ctxT(t), "dead-probe-api", 10); len(ids) != 2 {
			t.Fatalf("reaped %v, want both leases", ids)
		}
		if st := mustState(t, s, "dead-probe-api"); st.ProbeOut {
			t.Fatalf("probe token survived its holder's reaping: %+v", st)
		}
	})
}

func TestPauseGate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ids := mustEnqueue(t, s, "pause-api", 3)
		c := mustClaim(t, s, "pause-api", ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
		until := e.clk.Now().Add(30 * time.Second)
		r := mustComplete(t, s, c, policy.Completion{
			Action: policy.ActionRetry, NextAttemptAt: e.clk.Now().Add(time.Second), PausedUntil: until,
			Attempt: &policy.Attempt{StartedAt: t0, Status: 429, Outcome: policy.Retryable, Error: "status_429"},
		})
		if r.State != policy.Held || r.Breaker.ConsecutiveFailures != 0 {
			t.Fatalf("429 completion = %+v, want held and not counted", r)
		}
		if rec := mustGet(t, s, c.ID); !rec.NextAttemptAt.Equal(until) {
			t.Fatalf("held until %v, want %v", rec.NextAttemptAt, until)
		}
		// A callout scheduled before the pause is held while it lasts: its
		// record says so, and it is due when the pause ends.
		for _, id := range ids[1:] {
			if rec := mustGet(t, s, id); rec.State != policy.Held || !rec.NextAttemptAt.Equal(until) {
				t.Fatalf("scheduled callout during a pause: %s next %v, want held until %v", rec.State, rec.NextAttemptAt, until)
			}
		}
		got := mustClaim(t, s, "pause-api", claimOpts)
		if len(got.Claimed) != 0 || !got.NextDueAt.Equal(until) {
			t.Fatalf("claim while paused = %+v, want none, next due when the pause ends", got)
		}
		e.clk.Advance(30 * time.Second)
		if got := mustClaim(t, s, "pause-api", claimOpts); len(got.Claimed) != 3 {
			t.Fatalf("claim after the pause = %d, want 3", len(got.Claimed))
		}
	})
}

// claimConcurrently has n replicas (Stores) claim endpoint at once.
func claimConcurrently(t *testing.T, e *env, endpoint string, n int) []ClaimResult {
	t.Helper()
	replicas := make([]*Store, n)
	for i := range replicas {
		replicas[i] = e.store()
	}
	return concurrently(t, n, func(i int) (ClaimResult, error) {
		return replicas[i].Claim(ctxT(t), endpoint, ClaimOptions{Batch: 10, Lease: testLease})
	})
}

// TestProbeThatDoesNotCount: a probe answered with something that does not
// count toward the breaker (a permanent answer, a 429, a canceled read)
// gives no verdict on the upstream: the token is released and the breaker
// stays half-open, so the next request or held callout probes at once
// (policy Breaker.Record). A counting failure still reopens it.
func TestProbeThatDoesNotCount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		br := policy.BreakerSettings{Failures: 20, ProbeInterval: 5 * time.Minute, ProbeLease: 10 * time.Second}
		openBreaker(t, e, s, "nc-probe-api", 20)
		mustEnqueue(t, s, "nc-probe-api", 2)
		e.clk.Advance(5 * time.Minute)
		probeAt := e.clk.Now()

		// A read probe answered 404.
		ad, err := s.Admit(ctxT(t), "nc-probe-api", br)
		if err != nil || ad.ProbeToken == "" {
			t.Fatalf("admit at the probe time = %+v, %v", ad, err)
		}
		ch, err := s.RecordResult(ctxT(t), "nc-probe-api", policy.ReadResult{ProbeToken: ad.ProbeToken, Breaker: br})
		if err != nil || !ch.Probe || ch.Opened || ch.Closed || ch.ConsecutiveFailures != 20 {
			t.Fatalf("404 probe = %+v, %v", ch, err)
		}
		st := mustState(t, s, "nc-probe-api")
		if st.Breaker != policy.BreakerHalfOpen || st.ProbeOut || !st.ProbeAt.Equal(probeAt) || st.Gate.State != policy.GateHalfOpen {
			t.Fatalf("after a 404 probe = %+v, want half-open, token free, probe time unchanged", st)
		}

		// The next held callout is the probe; its permanent answer
		// dead-letters it and again leaves the breaker half-open.
		p := mustClaim(t, s, "nc-probe-api", claimOpts).Claimed
		if len(p) != 1 || p[0].Kind != policy.KindProbe {
			t.Fatalf("claim after a 404 probe = %+v, want one probe", p)
		}
		r := mustComplete(t, s, p[0], policy.Completion{Action: policy.ActionDeadLetter, Reason: policy.DeadLetterPermanent,
			Attempt: &policy.Attempt{StartedAt: e.clk.Now(), Status: 403, Outcome: policy.Permanent, Error: "status_4xx"}})
		if r.State != policy.DeadLettered || !r.Breaker.Probe {
			t.Fatalf("403 probe = %+v", r)
		}
		if st := mustState(t, s, "nc-probe-api"); st.Breaker != policy.BreakerHalfOpen || st.ProbeOut {
			t.Fatalf("after a 403 probe = %+v, want half-open, token free", st)
		}

		// A counting failure of the next probe reopens it for an interval.
		p = mustClaim(t, s, "nc-probe-api", claimOpts).Claimed
		if len(p) != 1 || p[0].Kind != policy.KindProbe {
			t.Fatalf("claim after a 403 probe = %+v, want one probe", p)
		}
		e.clk.Advance(time.Second)
		mustComplete(t, s, p[0], failure(e.clk.Now().Add(time.Minute)))
		if st := mustState(t, s, "nc-probe-api"); st.Breaker != policy.BreakerOpen ||
			!st.ProbeAt.Equal(e.clk.Now().Add(5*time.Minute)) || st.ProbeOut {
			t.Fatalf("after a failed probe = %+v, want open for another interval", st)
		}
	})
}
