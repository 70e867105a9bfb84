package policy

import (
	"net/http"
	"time"
)

// LeaseGrace is added to an endpoint's attempt limit to make a lease (contract
// §3: "a lease on a dispatched attempt lasts at least the attempt limit plus
// a grace period"), so a lease never expires while its attempt may still run.
const LeaseGrace = 10 * time.Second

// EndpointRules are the settings of one endpoint that the callout's life
// depends on, after inheritance from Policy (config.Endpoint.Rules builds
// them from the `endpoints:` key, contract §10).
type EndpointRules struct {
	// AttemptTimeout limits one whole attempt (attempt_timeout, default 15 s).
	AttemptTimeout time.Duration
	// BreakerFailures opens the breaker after this many consecutive counting
	// failures (breaker_failures, default 20, contract §6).
	BreakerFailures int
	// BreakerProbeInterval is how long an open breaker waits before its one
	// probe (breaker_probe_interval, default 5 m, contract §6).
	BreakerProbeInterval time.Duration
	// IdempotencyIgnored is true for `idempotency: ignored`: the upstream does
	// not honour Idempotency-Key, so an unanswered write is ambiguous (contract §3).
	IdempotencyIgnored bool
	// Backlog caps the endpoint's pending callouts (max_backlog_items,
	// max_backlog_bytes).
	Backlog BacklogLimits
}

// Lease is the lease of one attempt: the attempt limit plus LeaseGrace.
func (r EndpointRules) Lease() time.Duration { return r.AttemptTimeout + LeaseGrace }

// Breaker is the endpoint's circuit-breaker settings (contract §6), with the
// probe token leased like an attempt.
func (r EndpointRules) Breaker() BreakerSettings {
	return BreakerSettings{Failures: r.BreakerFailures, ProbeInterval: r.BreakerProbeInterval, ProbeLease: r.Lease()}
}

// AttemptResult is what one attempt produced, as the decision needs it.
type AttemptResult struct {
	// Response is the upstream's response; nil when there was none.
	Response *Response
	// Sent is true once the whole request was written to the upstream, even
	// if no response followed (an unanswered write may have been executed).
	Sent bool
	// Started is when the attempt began; Duration how long it took.
	Started  time.Time
	Duration time.Duration
}

// DecideInput is everything Decide looks at.
type DecideInput struct {
	Policy Policy
	Rules  EndpointRules
	// Claimed is the leased callout the attempt was made for.
	Claimed *Claimed
	Result  AttemptResult
	// Class is Classify of Result (the named classification step).
	Class Classification
	// Now is the completion time; Rand the jitter source, [0,1).
	Now  time.Time
	Rand func() float64
	// Sync is true when the caller waits for the answer (the ingress): a
	// permanent answer then ends `failed` and goes back to the caller
	// instead of becoming a dead letter (contract §7).
	Sync bool
}

// Decide turns one attempt into the completion the store applies (contract §3,
// §6, §7):
//   - 2xx: succeeded.
//   - rejected (the proxy refused the attempt before sending anything: a
//     blocked address, a credential it cannot resolve; contract §2): a dead
//     letter, reason permanent, never `failed` (a refusal is not the
//     upstream's answer) and never retried. A synchronous first attempt is
//     released instead (ReleasesRefusal) and not decided here.
//   - permanent: failed when Sync, else a dead letter, reason permanent.
//   - retryable, a write to an `idempotency: ignored` upstream that was sent
//     and got no answer: a dead letter, reason ambiguous (contract §3).
//   - retryable otherwise: retry after NextDelay (full jitter, with the
//     response's Retry-After honoured up to retry_after_cap), or a dead
//     letter, reason exhausted, when that retry would pass max_attempts or
//     max_age.
//
// A 429 with a valid Retry-After also pauses the whole endpoint until then
// (capped). Whether the attempt counts toward the breaker is
// CountsTowardBreaker. The store may still change the ending (a disabled
// endpoint turns a retry into a dead letter); CompleteResult says what it
// did.
func Decide(in DecideInput) Completion {
	c := Completion{
		Attempt:             attemptRecord(in),
		CountsTowardBreaker: CountsTowardBreaker(in.Class),
		Breaker:             in.Rules.Breaker(),
		Lease:               in.Rules.Lease(),
		Response:            in.Result.Response,
	}
	if in.Class.Outcome != Success {
		c.Error = in.Class.Reason
	}
	retryAfter, haveRA := retryAfterOf(in.Result.Response, in.Now)
	c.PausedUntil = PauseUntil(in.Policy, in.Result.Response, in.Now)
	switch {
	case in.Class.Outcome == Success:
		c.Action = ActionSucceed
	case in.Class.Outcome == Rejected:
		c.Action, c.Reason = ActionDeadLetter, DeadLetterPermanent
	case in.Class.Outcome != Retryable && in.Sync:
		c.Action = ActionFail
	case in.Class.Outcome != Retryable:
		c.Action, c.Reason = ActionDeadLetter, DeadLetterPermanent
	case ambiguous(in):
		c.Action, c.Reason = ActionDeadLetter, DeadLetterAmbiguous
	default:
		next := in.Now.Add(NextDelay(in.Policy, in.Claimed.Attempt, retryAfter, haveRA, in.Rand))
		if !NextAttemptFits(in.Policy, in.Claimed.Attempt, in.Claimed.FirstAttemptAt, next) {
			c.Action, c.Reason = ActionDeadLetter, DeadLetterExhausted
			break
		}
		c.Action, c.NextAttemptAt = ActionRetry, next
	}
	return c
}

// ReleasesRefusal reports whether an attempt the proxy refused before
// sending anything (outcome rejected) releases its callout — deletes it with
// its idempotency reservation, as if it had never been recorded — instead of
// ending it as a dead letter. Only the first attempt of a synchronous
// request does: nothing was sent for it and nobody was told its id, so the
// refusal is a rejection before dispatch, answered to the caller and never
// stored as the key's result (contract §5). Any other refused attempt
// belongs to an accepted callout — a 202 gave the caller its id, or an
// earlier attempt reached the upstream — which must not vanish (contract
// §1: no accepted callout is lost): Decide ends it as a dead letter, reason
// permanent, kept and mirrored like any other (contract §7), never retried
// (contract §2: rejected). sync is DecideInput.Sync; cl the claimed callout,
// its Attempt the number of the refused attempt (1-based).
func ReleasesRefusal(sync bool, cl *Claimed) bool { return sync && cl.Attempt <= 1 }

// attemptRecord is the attempt-log entry of in.Result.
func attemptRecord(in DecideInput) *Attempt {
	a := &Attempt{StartedAt: in.Result.Started, Duration: in.Result.Duration, Outcome: in.Class.Outcome}
	if in.Result.Response != nil {
		a.Status = in.Result.Response.Status
	}
	if in.Class.Outcome != Success {
		a.Error = in.Class.Reason
	}
	return a
}

// ambiguous reports a write to an upstream that does not honour
// Idempotency-Key which was sent and got no answer: retrying could execute
// it twice, so it is not retried (contract §3).
func ambiguous(in DecideInput) bool {
	return in.Rules.IdempotencyIgnored && IsWrite(in.Claimed.Method) && in.Result.Response == nil && in.Result.Sent
}

// PauseUntil is when an endpoint-wide pause ends after resp: a 429 with a
// valid Retry-After pauses the whole endpoint until then, capped at
// retry_after_cap (contract §3). Zero when resp asks for no pause.
func PauseUntil(p Policy, resp *Response, now time.Time) time.Time {
	ra, ok := retryAfterOf(resp, now)
	if !ok || resp.Status != http.StatusTooManyRequests || ra <= 0 {
		return time.Time{}
	}
	return now.Add(min(ra, p.RetryAfterCap))
}

// retryAfterOf parses the response's Retry-After (RFC 9110 §10.2.3).
func retryAfterOf(r *Response, now time.Time) (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	v := r.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	return ParseRetryAfter(v, now)
}

// IsWrite reports whether method is a write in contract §4's sense: anything but
// GET, HEAD and OPTIONS.
func IsWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// Finished describes a callout that ended: succeeded, or dead-lettered
// (contract §7, §8 "Async completion"), as the store's completion reported it.
type Finished struct {
	ID       string
	Endpoint string
	State    State
	// Reason is the dead-letter reason; "" when it succeeded.
	Reason DeadLetterReason
}
