package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// The breaker's transitions (contract §6) live in Lua (lib.lua breaker_update,
// breaker_state, gate) and nowhere else (ARCHITECTURE.md). These tests drive
// them through the scripts the live paths run — reads through admit.lua and
// outcome.lua — on every backend (miniredis, a real node, a real cluster).
// They are the table that once tested a Go model of the same rules
// (policy.Breaker.Record, deleted): each case keeps its assertions, now
// against the one implementation.

// breakerEvent is one result applied to the breaker.
type breakerEvent struct {
	cls   policy.Classification
	probe bool // take the probe token (Admit) first; the breaker must be half-open
}

var (
	c503    = policy.Classification{Outcome: policy.Retryable, Reason: policy.ReasonStatus5xx}
	c429    = policy.Classification{Outcome: policy.Retryable, Reason: policy.ReasonStatus429}
	c400    = policy.Classification{Outcome: policy.Permanent, Reason: policy.ReasonStatus4xx}
	c200    = policy.Classification{Outcome: policy.Success, Reason: policy.ReasonStatus2xx}
	cCancel = policy.Classification{Outcome: policy.Retryable, Reason: policy.ReasonCanceled}
)

// settings are the default breaker settings: 20 failures, 5 min interval.
var settings = policy.BreakerSettings{Failures: 20, ProbeInterval: 5 * time.Minute, ProbeLease: testLease}

// apply runs ev against endpoint's breaker exactly as the read path does.
func apply(t *testing.T, e *env, s *Store, endpoint string, br policy.BreakerSettings, ev breakerEvent) {
	t.Helper()
	ctx := ctxT(t)
	token := ""
	if ev.probe {
		ad, err := s.Admit(ctx, endpoint, br)
		if err != nil || ad.ProbeToken == "" {
			t.Fatalf("admit for a probe: %+v, %v", ad, err)
		}
		token = ad.ProbeToken
	}
	_, err := s.RecordResult(ctx, endpoint, policy.ReadResult{
		ProbeToken: token, Success: ev.cls.Outcome == policy.Success,
		CountsTowardBreaker: policy.CountsTowardBreaker(ev.cls), Breaker: br,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// applyFromT0 sets the clock to t0 and applies evs to endpoint's breaker
// in order, as apply does.
func applyFromT0(t *testing.T, e *env, s *Store, endpoint string, br policy.BreakerSettings, evs []breakerEvent) {
	t.Helper()
	e.clk.Set(t0)
	for _, ev := range evs {
		apply(t, e, s, endpoint, br, ev)
	}
}

// failures returns n counted failures.
func failures(n int) []breakerEvent {
	evs := make([]breakerEvent, n)
	for i := range evs {
		evs[i] = breakerEvent{cls: c503}
	}
	return evs
}

// wantBreaker is the breaker as EndpointState reports it.
type wantBreaker struct {
	state    policy.BreakerState
	failures int
	openedAt time.Duration // since t0; -1: zero
	probeAt  time.Duration // since t0; -1: zero
}

func TestBreakerTransitionsInLua(t *testing.T) {
	none := time.Duration(-1)
	open := []breakerEvent(failures(20)) // at t0: opened t0, probe t0+5m
	tests := []struct {
		name  string
		br    policy.BreakerSettings
		start []breakerEvent // applied at t0
		at    time.Duration  // when ev is applied, since t0
		ev    breakerEvent
		want  wantBreaker
	}{
		{"first failure", settings, nil, 0, breakerEvent{cls: c503}, wantBreaker{policy.BreakerClosed, 1, none, none}},
		{"19th failure stays closed", settings, failures(18), 0, breakerEvent{cls: c503}, wantBreaker{policy.BreakerClosed, 19, none, none}},
		{"20th failure opens", settings, failures(19), 0, breakerEvent{cls: c503}, wantBreaker{policy.BreakerOpen, 20, 0, 5 * time.Minute}},
		{"429 never counts", settings, failures(19), 0, breakerEvent{cls: c429}, wantBreaker{policy.BreakerClosed, 19, none, none}},
		{"permanent neither counts nor resets", settings, failures(19), 0, breakerEvent{cls: c400}, wantBreaker{policy.BreakerClosed, 19, none, none}},
		{"canceled neither counts nor resets", settings, failures(19), 0, breakerEvent{cls: cCancel}, wantBreaker{policy.BreakerClosed, 19, none, none}},
		{"success resets the streak", settings, failures(19), 0, breakerEvent{cls: c200}, wantBreaker{policy.BreakerClosed, 0, none, none}},
		{"success from zero", settings, nil, 0, breakerEvent{cls: c200}, wantBreaker{policy.BreakerClosed, 0, none, none}},
		{"straggler failure while open keeps probe time", settings, open, time.Minute, breakerEvent{cls: c503},
			wantBreaker{policy.BreakerOpen, 21, 0, 5 * time.Minute}},
		{"straggler success while open closes", settings, open, time.Minute, breakerEvent{cls: c200}, wantBreaker{policy.BreakerClosed, 0, none, none}},
		{"probe failure reopens for one interval, keeps opened_at", settings, open, 6 * time.Minute, breakerEvent{cls: c503, probe: true},
			wantBreaker{policy.BreakerOpen, 21, 0, 11 * time.Minute}},
		{"probe success closes", settings, open, 6 * time.Minute, breakerEvent{cls: c200, probe: true}, wantBreaker{policy.BreakerClosed, 0, none, none}},
		{"probe permanent leaves it half-open", settings, open, 6 * time.Minute, breakerEvent{cls: c400, probe: true},
			wantBreaker{policy.BreakerHalfOpen, 20, 0, 5 * time.Minute}},
		{"probe 429 leaves it half-open", settings, open, 6 * time.Minute, breakerEvent{cls: c429, probe: true},
			wantBreaker{policy.BreakerHalfOpen, 20, 0, 5 * time.Minute}},
		// The live rule for a threshold below 1 is BreakerSettings' default
		// (20); config validation refuses such a value before it gets here.
		{"breaker_failures 0 means the default 20", policy.BreakerSettings{ProbeInterval: 5 * time.Minute, ProbeLease: testLease},
			failures(19), 0, breakerEvent{cls: c503}, wantBreaker{policy.BreakerOpen, 20, 0, 5 * time.Minute}},
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := e.store()
				ep := fmt.Sprintf("rules-api-%d", i)
				applyFromT0(t, e, s, ep, tt.br, tt.start)
				e.clk.Advance(tt.at)
				apply(t, e, s, ep, tt.br, tt.ev)
				checkBreaker(t, mustState(t, s, ep), tt.want)
				if tt.ev.probe && mustState(t, s, ep).ProbeOut {
					t.Errorf("the probe token was not freed after the probe's result")
				}
			})
		}
	})
}

// checkBreaker compares st with w.
func checkBreaker(t *testing.T, st policy.EndpointState, w wantBreaker) {
	t.Helper()
	at := func(d time.Duration) time.Time {
		if d < 0 {
			return time.Time{}
		}
		return t0.Add(d)
	}
	if st.Breaker != w.state || st.ConsecutiveFailures != w.failures {
		t.Errorf("breaker %s with %d failures, want %s with %d", st.Breaker, st.ConsecutiveFailures, w.state, w.failures)
	}
	if w.state != policy.BreakerClosed && (!st.OpenedAt.Equal(at(w.openedAt)) || !st.ProbeAt.Equal(at(w.probeAt))) {
		t.Errorf("opened %v probe %v, want %v and %v", st.OpenedAt, st.ProbeAt, at(w.openedAt), at(w.probeAt))
	}
}

// Twenty consecutive retryable failures, with 429s and permanents mixed in,
// open the breaker; a success in between starts the count again.
func TestBreakerSequenceInLua(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		for i := range 19 {
			for _, c := range []policy.Classification{c503, c429, c400} {
				apply(t, e, s, "seq-api", settings, breakerEvent{cls: c})
			}
			if st := mustState(t, s, "seq-api"); st.Breaker != policy.BreakerClosed || st.ConsecutiveFailures != i+1 {
				t.Fatalf("after %d failures: %+v", i+1, st)
			}
		}
		apply(t, e, s, "seq-api", settings, breakerEvent{cls: c200})
		if st := mustState(t, s, "seq-api"); st.ConsecutiveFailures != 0 {
			t.Fatalf("success did not reset: %+v", st)
		}
		for range 20 {
			apply(t, e, s, "seq-api", settings, breakerEvent{cls: c503})
		}
		if st := mustState(t, s, "seq-api"); st.Breaker != policy.BreakerOpen || !st.OpenedAt.Equal(t0) {
			t.Fatalf("20 failures did not open at %v: %+v", t0, st)
		}
	})
}

// The gate and breaker at the probe-time boundary, as gate_read.lua reports
// them (ms resolution in Redis): open until the probe time, then half-open.
func TestBreakerStateAtProbeTime(t *testing.T) {
	tests := []struct {
		name  string
		at    time.Duration
		state policy.BreakerState
		gate  policy.GateState
		until time.Duration // -1: zero
	}{
		{"just opened", 0, policy.BreakerOpen, policy.GateBreakerOpen, 5 * time.Minute},
		{"1ms before probe", 5*time.Minute - time.Millisecond, policy.BreakerOpen, policy.GateBreakerOpen, 5 * time.Minute},
		{"at probe time", 5 * time.Minute, policy.BreakerHalfOpen, policy.GateHalfOpen, -1},
		{"after probe time", time.Hour, policy.BreakerHalfOpen, policy.GateHalfOpen, -1},
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := e.store()
				ep := fmt.Sprintf("probe-time-api-%d", i)
				applyFromT0(t, e, s, ep, settings, failures(20))
				e.clk.Advance(tt.at)
				st := mustState(t, s, ep)
				want := time.Time{}
				if tt.until >= 0 {
					want = t0.Add(tt.until)
				}
				if st.Breaker != tt.state || st.Gate.State != tt.gate || !st.Gate.Until.Equal(want) {
					t.Errorf("breaker %s gate %+v, want %s %s until %v", st.Breaker, st.Gate, tt.state, tt.gate, want)
				}
			})
		}
	})
}
