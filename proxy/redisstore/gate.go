package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// decodeBreakerChange decodes {opened, closed, began, ended} and the
// failures, outage-start and probe values of a script reply.
func decodeBreakerChange(flags []any, failures, outage, probe any) policy.BreakerChange {
	return policy.BreakerChange{
		Opened: replyInt(flags[0]) == 1, Closed: replyInt(flags[1]) == 1,
		OutageBegan: replyInt(flags[2]) == 1, OutageEnded: replyInt(flags[3]) == 1,
		Probe: replyInt(probe) == 1, ConsecutiveFailures: int(replyInt(failures)),
		OutageStartedAt: fromMs(replyStr(outage)),
	}
}

// Admit checks endpoint's gate for a request without a callout record and,
// when the breaker is half-open and the probe token free, gives the token to
// this request (contract §6 "the first request or held callout that takes the
// single probe token"). br.ProbeLease must be > 0 (the request's attempt
// limit plus a grace period). One round trip (admit.lua), always; its
// reply refreshes the gate cache while WatchGates runs, and
// CachedAdmission answers from that cache when it can (ARCHITECTURE.md "Hot-path
// budget"). Errors: ErrUnavailable.
func (s *Store) Admit(ctx context.Context, endpoint string, br policy.BreakerSettings) (policy.Admission, error) {
	if br.ProbeLease <= 0 {
		return policy.Admission{}, fmt.Errorf("redisstore: admit: probe lease must be > 0")
	}
	tok, err := s.token()
	if err != nil {
		return policy.Admission{}, err
	}
	now := s.now()
	seq := s.gates.seq.Add(1)
	v, err := s.run(ctx, "admit", s.lua.admit, []string{endpointKey(endpoint)},
		msArg(now), tok, msArg(now.Add(br.ProbeLease)))
	if err != nil {
		return policy.Admission{}, err
	}
	a, err := replyN("admit", v, 3)
	if err != nil {
		return policy.Admission{}, err
	}
	ad := policy.Admission{
		Gate:                policy.Gate{State: policy.GateState(replyStr(a[0])), Until: fromMs(replyStr(a[1]))},
		ConsecutiveFailures: int(replyInt(a[2])),
	}
	if ad.Gate.State == "probe" {
		ad.Gate, ad.ProbeToken = policy.Gate{State: policy.GateHalfOpen}, tok
	}
	s.gates.admitted(endpoint, seq, now, ad)
	return ad, nil
}

// RecordResult applies a read's result to endpoint's breaker and pause
// exactly as Complete does for a callout (outcome.lua). Skip it for a
// success when Admission.ConsecutiveFailures was 0 and there was no probe
// token. Errors: ErrUnavailable.
func (s *Store) RecordResult(ctx context.Context, endpoint string, r policy.ReadResult) (policy.BreakerChange, error) {
	now := s.now()
	br := r.Breaker.WithDefaults(time.Minute)
	paused := "0"
	if r.PausedUntil.After(now) {
		paused = msArg(r.PausedUntil)
	}
	home := queueAt(endpoint, ShardOf(endpoint))
	v, err := s.run(ctx, "record result", s.lua.outcome, []string{home.ep, home.due},
		msArg(now), r.ProbeToken, flag(r.Success), flag(r.CountsTowardBreaker),
		strconv.Itoa(br.Failures), msArg(now.Add(br.ProbeInterval)), paused)
	if err != nil {
		return policy.BreakerChange{}, err
	}
	a, err := replyN("record result", v, 7)
	if err != nil {
		return policy.BreakerChange{}, err
	}
	ch := decodeBreakerChange(a[0:4], a[4], a[5], a[6])
	if len(a) > 8 {
		ch.Held, ch.HeldBy = int(replyInt(a[7])), policy.GateState(replyStr(a[8]))
	}
	s.gateChanged(endpoint, ch, paused != "0")
	return ch, nil
}
