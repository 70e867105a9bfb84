package policy

import (
	"time"
)

// BreakerState is the state of an endpoint's circuit breaker (contract §6),
// as shown by the admin API and calloutctl.
type BreakerState string

// The circuit breaker states of contract §6.
const (
	// BreakerClosed: requests flow; counted failures accumulate.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: requests are refused (reads) or held (writes) until the
	// probe time.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: the probe time has come; the one request or held
	// callout that takes the single probe token is the probe.
	BreakerHalfOpen BreakerState = "half_open"
)

// CountsTowardBreaker reports whether an attempt's outcome is a failure that
// counts toward opening the breaker (contract §6): a Retryable outcome except
// a 429 (the upstream is alive and asked us to slow down; its Retry-After
// pauses the endpoint instead), except "canceled" (the proxy itself gave
// up, e.g. at shutdown, which says nothing about the upstream) and except
// "overloaded" (the upstream answered; the proxy's own memory budget had no
// room to keep the answer, so another organisation's use of memory never
// opens a breaker partition). Permanent, Success and Rejected never count.
func CountsTowardBreaker(c Classification) bool {
	return c.Outcome == Retryable && c.Reason != ReasonStatus429 && c.Reason != ReasonCanceled &&
		c.Reason != ReasonOverloaded
}

// AutoDisable reports whether an endpoint is to be disabled (contract §6):
// it has failed for DisableAfter without a single success. The time is
// measured from the start of the current outage — firstFailure, the first
// counted failure after the last success — so an endpoint that was idle
// after its last success is not disabled by its next failure: the product
// promise is "an endpoint that fails for 72 h without a single success".
// The bound is inclusive.
//
// firstFailure is zero when there is no outage; a firstFailure at or before
// lastSuccess belongs to an earlier outage: false.
func AutoDisable(p Policy, lastSuccess, firstFailure, now time.Time) bool {
	if firstFailure.IsZero() || (!lastSuccess.IsZero() && !firstFailure.After(lastSuccess)) {
		return false
	}
	return now.Sub(firstFailure) >= p.DisableAfter
}
