package policy

import "time"

// Action is what a completion does with the callout. The policy (attempts,
// max_age, outcome class, idempotency: ignored) decides; the store applies.
type Action string

// Completion is the result of one leased attempt, applied atomically by
// Complete.
type Completion struct {
	// Action is what to do with the callout.
	Action Action
	// Attempt is the attempt just made (its N and Kind are taken from the
	// claim). Nil when the claimed callout was never dispatched (e.g. found
	// exhausted before sending): its attempt count is then undone and the
	// breaker untouched.
	Attempt *Attempt
	// Response is the upstream's response to the attempt, nil when there
	// was none; its body is cut to Options.ResponseBodyCap.
	Response *Response
	// Error is the attempt's error text (no secrets); "" when none.
	Error string
	// CountsTowardBreaker: a retryable failure that counts toward the
	// breaker (contract §6: 429 and permanent answers never count).
	CountsTowardBreaker bool
	// NextAttemptAt is when a retry is due (ActionRetry, and
	// ActionRetryInline when refused).
	NextAttemptAt time.Time
	// Reason is the dead-letter reason (ActionDeadLetter).
	Reason DeadLetterReason
	// PausedUntil, when set, pauses the whole endpoint until then (429 with
	// Retry-After, capped by the caller at retry_after_cap, contract §3). An
	// existing longer pause is kept.
	PausedUntil time.Time
	// Lease is the renewed lease for ActionRetryInline.
	Lease time.Duration
	// Breaker is the endpoint's breaker settings (threshold, interval).
	Breaker BreakerSettings
}

// CompleteResult is what a completion changed.
type CompleteResult struct {
	// State is the callout's new state: succeeded, failed, scheduled, held,
	// dead_lettered, or in_flight after an accepted ActionRetryInline.
	State State
	// Attempts is the callout's attempt count afterwards.
	Attempts int
	// Reason is the dead-letter reason when State is DeadLettered ("" for
	// any other state). It is the store's final word, not necessarily
	// Completion.Reason: a retry whose endpoint was disabled while the
	// attempt ran ends DeadLetterEndpointDisabled (contract §6).
	Reason DeadLetterReason
	// NotifyOwner: this is the first dead letter of the current outage; the
	// owner must be told (exactly one completion per outage gets it, contract §6).
	NotifyOwner bool
	// Breaker is what the completion did to the endpoint's breaker.
	Breaker BreakerChange
	// Gate is the endpoint's gate the store saw after the result: when
	// State is Held, what holds the callout (breaker_open, probing,
	// paused).
	Gate GateState
	// LastStatus and LastError are the callout's last upstream status (0:
	// none) and last error after the result, as its record keeps them.
	LastStatus int
	LastError  string
}

// BreakerChange is what one result did to an endpoint's circuit breaker
// and outage (contract §6).
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
	// Held is how many waiting callouts this result shut the gate on (it
	// opened the breaker, or began a 429's pause): from now they are held,
	// not scheduled, by HeldBy (breaker_open, paused). Counted once, by the
	// result that shut the gate, whichever replica made it.
	Held   int
	HeldBy GateState
	// Partition is the organisation (JWT issuer) whose breaker partition
	// the result went to (contract §6, breaker.partition organisation):
	// Opened, Closed, Probe and ConsecutiveFailures are then that
	// partition's (an Opened may have opened the endpoint's own breaker
	// too); "" for the endpoint's own breaker.
	Partition string
}

// The completion actions.
const (
	// ActionSucceed: 2xx; the callout ends succeeded.
	ActionSucceed Action = "succeeded"
	// ActionFail: a synchronous permanent answer returned to the caller;
	// the callout ends failed (recorded for idempotent replay, contract §7).
	ActionFail Action = "failed"
	// ActionRetry: reschedule at Completion.NextAttemptAt (held instead when
	// the gate is now shut; dead-lettered endpoint_disabled when the
	// endpoint is disabled).
	ActionRetry Action = "retry"
	// ActionRetryInline (Prefer: wait=N, contract §4): keep the lease and make
	// the next attempt now; the attempt is counted and the lease renewed
	// to now+Completion.Lease. When the gate is no longer open the store
	// refuses and reschedules at Completion.NextAttemptAt instead (the
	// result's State says which).
	ActionRetryInline Action = "again"
	// ActionDeadLetter: end as a dead letter with Completion.Reason.
	ActionDeadLetter Action = "dead"
)
