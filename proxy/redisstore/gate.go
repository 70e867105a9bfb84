package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// BreakerChange is what one result did to an endpoint's circuit breaker
// and outage (SPEC §6).
type BreakerChange struct {
	// Opened: this result opened the breaker. When completions race at the
	// threshold exactly one gets it, and only it wrote opened_at.
	Opened bool
	// Closed: this result closed an open breaker.
	Closed bool
	// OutageBegan / OutageEnded: this result began an outage (first
	// counting failure after a success) or ended one (the next success).
	OutageBegan, OutageEnded bool
	// Probe: the result was the probe's (it held the probe token).
	Probe bool
	// ConsecutiveFailures is the endpoint's count afterwards.
	ConsecutiveFailures int
	// OutageStartedAt is when the current outage began (zero: none); the
	// auto-disable rule (disable_after) measures from it.
	OutageStartedAt time.Time
}

// decodeBreakerChange decodes {opened, closed, began, ended} and the
// failures, outage-start and probe values of a script reply.
func decodeBreakerChange(flags []any, failures, outage, probe any) BreakerChange {
	return BreakerChange{
		Opened: replyInt(flags[0]) == 1, Closed: replyInt(flags[1]) == 1,
		OutageBegan: replyInt(flags[2]) == 1, OutageEnded: replyInt(flags[3]) == 1,
		Probe: replyInt(probe) == 1, ConsecutiveFailures: int(replyInt(failures)),
		OutageStartedAt: fromMs(replyStr(outage)),
	}
}

// Admission is the gate decision for a request that has no callout record
// (a read, SPEC §4).
type Admission struct {
	// Gate is GateOpen (forward it), GateHalfOpen (forward it: it is the
	// probe, ProbeToken is set) or a shut gate (refuse: 503, Retry-After
	// from Gate.Until; GateDisabled: endpoint-disabled).
	Gate Gate
	// ProbeToken is set when this request took the probe token; pass it to
	// RecordResult.
	ProbeToken string
	// ConsecutiveFailures is the endpoint's count: when it is 0 a success
	// needs no RecordResult (DESIGN: a success costs no write then).
	ConsecutiveFailures int
}

// Admit checks endpoint's gate for a request without a callout record and,
// when the breaker is half-open and the probe token free, gives the token to
// this request (SPEC §6 "the first request or held callout that takes the
// single probe token"). br.ProbeLease must be > 0 (the request's attempt
// limit plus a grace period). One round trip (admit.lua); callers may cache
// an open gate briefly (DESIGN "Hot-path budget"). Errors: ErrUnavailable.
func (s *Store) Admit(ctx context.Context, endpoint string, br Breaker) (Admission, error) {
	if br.ProbeLease <= 0 {
		return Admission{}, fmt.Errorf("redisstore: admit: probe lease must be > 0")
	}
	tok, err := s.token()
	if err != nil {
		return Admission{}, err
	}
	now := s.now()
	v, err := s.run(ctx, "admit", s.lua.admit, []string{keysOf(endpoint).ep},
		msArg(now), tok, msArg(now.Add(br.ProbeLease)))
	if err != nil {
		return Admission{}, err
	}
	a, err := replyN("admit", v, 3)
	if err != nil {
		return Admission{}, err
	}
	ad := Admission{
		Gate:                Gate{State: GateState(replyStr(a[0])), Until: fromMs(replyStr(a[1]))},
		ConsecutiveFailures: int(replyInt(a[2])),
	}
	if ad.Gate.State == "probe" {
		ad.Gate, ad.ProbeToken = Gate{State: GateHalfOpen}, tok
	}
	return ad, nil
}

// ReadResult is the result of a request without a callout record, for the
// breaker.
type ReadResult struct {
	// ProbeToken is Admission.ProbeToken ("" when the request was no probe).
	ProbeToken string
	// Success: the upstream answered 2xx.
	Success bool
	// CountsTowardBreaker: a retryable failure that counts (SPEC §6).
	CountsTowardBreaker bool
	// PausedUntil, when set, pauses the endpoint (429 Retry-After, SPEC §3).
	PausedUntil time.Time
	// Breaker is the endpoint's breaker settings (threshold, interval).
	Breaker Breaker
}

// RecordResult applies a read's result to endpoint's breaker and pause
// exactly as Complete does for a callout (outcome.lua). Skip it for a
// success when Admission.ConsecutiveFailures was 0 and there was no probe
// token. Errors: ErrUnavailable.
func (s *Store) RecordResult(ctx context.Context, endpoint string, r ReadResult) (BreakerChange, error) {
	now := s.now()
	br := r.Breaker.withDefaults(time.Minute)
	paused := "0"
	if r.PausedUntil.After(now) {
		paused = msArg(r.PausedUntil)
	}
	v, err := s.run(ctx, "record result", s.lua.outcome, []string{keysOf(endpoint).ep},
		msArg(now), r.ProbeToken, flag(r.Success), flag(r.CountsTowardBreaker),
		strconv.Itoa(br.Failures), msArg(now.Add(br.ProbeInterval)), paused)
	if err != nil {
		return BreakerChange{}, err
	}
	a, err := replyN("record result", v, 7)
	if err != nil {
		return BreakerChange{}, err
	}
	return decodeBreakerChange(a[0:4], a[4], a[5], a[6]), nil
}
