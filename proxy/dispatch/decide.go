// Package dispatch makes the attempts the caller is not waiting for: every
// replica runs a Dispatcher that claims due callouts from the Redis delay
// queue under a lease, dispatches them, and completes each in one atomic
// step (SPEC §3, DESIGN "Data flow" 2). Decide, the policy applied after any
// attempt, is shared with the synchronous ingress.
package dispatch

import (
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
)

// LeaseGrace is added to an endpoint's attempt limit to make a lease (SPEC
// §3: "a lease on a dispatched attempt lasts at least the attempt limit plus
// a grace period"), so a lease never expires while its attempt may still run.
const LeaseGrace = 10 * time.Second

// Lease is the lease of one attempt to ep: its attempt limit plus LeaseGrace.
func Lease(ep *config.Endpoint) time.Duration { return ep.AttemptTimeout + LeaseGrace }

// Breaker is ep's circuit-breaker settings for the store (SPEC §6), with
// the probe token leased like an attempt.
func Breaker(ep *config.Endpoint) policy.BreakerSettings {
	return policy.BreakerSettings{
		Failures: ep.BreakerFailures, ProbeInterval: ep.BreakerProbeInterval, ProbeLease: Lease(ep),
	}
}

// Input is everything Decide looks at.
type Input struct {
	Policy   policy.Policy
	Endpoint *config.Endpoint
	Claimed  *policy.Claimed
	Attempt  forward.Attempt
	// Class is policy.Classify of Attempt.
	Class policy.Classification
	// Now is the completion time; Rand the jitter source, [0,1).
	Now  time.Time
	Rand func() float64
	// Sync is true when the caller waits for the answer (the ingress): a
	// permanent answer then ends `failed` and goes back to the caller
	// instead of becoming a dead letter (SPEC §7).
	Sync bool
}

// Decide turns one attempt into the completion the store applies (SPEC §3,
// §6, §7):
//   - 2xx: succeeded.
//   - permanent: failed when Sync, else a dead letter, reason permanent.
//   - retryable, a write to an `idempotency: ignored` upstream that was sent
//     and got no answer: a dead letter, reason ambiguous (SPEC §3).
//   - retryable otherwise: retry after policy.NextDelay (full jitter, with
//     the response's Retry-After honoured up to retry_after_cap), or a dead
//     letter, reason exhausted, when that retry would pass max_attempts or
//     max_age.
//
// A 429 with a valid Retry-After also pauses the whole endpoint until then
// (capped). Whether the attempt counts toward the breaker is
// policy.CountsTowardBreaker.
func Decide(in Input) policy.Completion {
	c := policy.Completion{
		Attempt:             attemptRecord(in),
		CountsTowardBreaker: policy.CountsTowardBreaker(in.Class),
		Breaker:             Breaker(in.Endpoint),
		Lease:               Lease(in.Endpoint),
	}
	if r := in.Attempt.Response; r != nil {
		c.Response = &policy.Response{Status: r.Status, Header: r.Header, Body: r.Body}
	}
	if in.Class.Outcome != policy.Success {
		c.Error = in.Class.Reason
	}
	retryAfter, haveRA := retryAfterOf(in.Attempt.Response, in.Now)
	c.PausedUntil = PauseUntil(in.Policy, in.Attempt.Response, in.Now)
	switch {
	case in.Class.Outcome == policy.Success:
		c.Action = policy.ActionSucceed
	case in.Class.Outcome != policy.Retryable && in.Sync:
		c.Action = policy.ActionFail
	case in.Class.Outcome != policy.Retryable:
		c.Action, c.Reason = policy.ActionDeadLetter, policy.DeadLetterPermanent
	case ambiguous(in):
		c.Action, c.Reason = policy.ActionDeadLetter, policy.DeadLetterAmbiguous
	default:
		next := in.Now.Add(policy.NextDelay(in.Policy, in.Claimed.Attempt, retryAfter, haveRA, in.Rand))
		if !policy.NextAttemptFits(in.Policy, in.Claimed.Attempt, in.Claimed.FirstAttemptAt, next) {
			c.Action, c.Reason = policy.ActionDeadLetter, policy.DeadLetterExhausted
			break
		}
		c.Action, c.NextAttemptAt = policy.ActionRetry, next
	}
	return c
}

// attemptRecord is the attempt-log entry of in.Attempt.
func attemptRecord(in Input) *policy.Attempt {
	a := &policy.Attempt{
		StartedAt: in.Attempt.Started, Duration: in.Attempt.Duration,
		Outcome: in.Class.Outcome,
	}
	if in.Attempt.Response != nil {
		a.Status = in.Attempt.Response.Status
	}
	if in.Class.Outcome != policy.Success {
		a.Error = in.Class.Reason
	}
	return a
}

// ambiguous reports a write to an upstream that does not honour
// Idempotency-Key which was sent and got no answer: retrying could execute
// it twice, so it is not retried (SPEC §3).
func ambiguous(in Input) bool {
	return in.Endpoint.Idempotency == config.IdempotencyIgnored &&
		IsWrite(in.Claimed.Method) && in.Attempt.Response == nil && in.Attempt.Sent
}

// PauseUntil is when an endpoint-wide pause ends after resp: a 429 with a
// valid Retry-After pauses the whole endpoint until then, capped at
// retry_after_cap (SPEC §3). Zero when resp asks for no pause.
func PauseUntil(p policy.Policy, resp *forward.Response, now time.Time) time.Time {
	ra, ok := retryAfterOf(resp, now)
	if !ok || resp.Status != http.StatusTooManyRequests || ra <= 0 {
		return time.Time{}
	}
	return now.Add(min(ra, p.RetryAfterCap))
}

// retryAfterOf parses the response's Retry-After (RFC 9110 §10.2.3).
func retryAfterOf(r *forward.Response, now time.Time) (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	v := r.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	return policy.ParseRetryAfter(v, now)
}

// IsWrite reports whether method is a write in SPEC §4's sense: anything but
// GET, HEAD and OPTIONS.
func IsWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
