package policy

import (
	"math"
	"time"
)

// BreakerState is the state of an endpoint's circuit breaker (SPEC.md §6),
// as shown by the admin API and calloutctl.
type BreakerState string

// The circuit breaker states of SPEC.md §6.
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
// counts toward opening the breaker (SPEC.md §6): a Retryable outcome except
// a 429 (the upstream is alive and asked us to slow down; its Retry-After
// pauses the endpoint instead) and except "canceled" (the proxy itself gave
// up, e.g. at shutdown, which says nothing about the upstream). Permanent,
// Success and Rejected never count.
func CountsTowardBreaker(c Classification) bool {
	return c.Outcome == Retryable && c.Reason != ReasonStatus429 && c.Reason != ReasonCanceled
}

// ResetsBreaker reports whether an attempt's outcome resets the
// consecutive-failure count and closes the breaker: only Success.
//
// Decision: a Permanent answer does NOT reset the streak. It proves the
// upstream is reachable, not that it is healthy — a failing upstream can
// still answer 400 or 404 to some requests between its 503s — so we reset
// only on a 2xx. Neither does a 429 or a canceled attempt. The Redis scripts
// implement the same rule.
func ResetsBreaker(c Classification) bool {
	return c.Outcome == Success
}

// Breaker is one endpoint's circuit breaker as the store keeps it, and
// Record is the reference model of its transitions (SPEC.md §6): the Redis
// Lua scripts implement the same rules; the admin API and tests use this to
// compute what they should see.
type Breaker struct {
	// State is BreakerClosed or BreakerOpen as stored; "" reads as closed.
	// BreakerHalfOpen is derived by At once ProbeAt has come (a stored
	// half_open reads as half_open).
	State BreakerState
	// Failures is the number of consecutive counted failures
	// (CountsTowardBreaker) since the last success.
	Failures int
	// OpenedAt is when the breaker opened, written once when it goes from
	// closed to open and kept through failed probes; zero when closed.
	OpenedAt time.Time
	// ProbeAt is when an open breaker next lets a probe through; zero when
	// closed.
	ProbeAt time.Time
}

// At returns the breaker's state at now: BreakerHalfOpen when it is open and
// now is at or after ProbeAt, otherwise the stored state (closed when unset
// or unknown).
func (b Breaker) At(now time.Time) BreakerState {
	switch b.State {
	case BreakerHalfOpen:
		return BreakerHalfOpen
	case BreakerOpen:
		if now.Before(b.ProbeAt) {
			return BreakerOpen
		}
		return BreakerHalfOpen
	default:
		return BreakerClosed
	}
}

// UntilProbe returns how long an open breaker still refuses requests at now,
// the basis of the Retry-After on its 503 (SPEC.md §4): ProbeAt − now while
// At(now) is BreakerOpen, else 0. The HTTP layer rounds it up to seconds.
func (b Breaker) UntilProbe(now time.Time) time.Duration {
	if b.At(now) != BreakerOpen {
		return 0
	}
	return b.ProbeAt.Sub(now)
}

// Record returns the breaker after an attempt classified c finished at now
// (SPEC.md §6). probe says whether that attempt held the probe token.
//
//   - Success (ResetsBreaker), in any state, probe or not: closed, Failures
//     0, times cleared. A 2xx from an attempt that started before the breaker
//     opened is the same evidence of health a probe seeks.
//   - An outcome that does not count (Permanent, 429, canceled): unchanged.
//     A probe that ends so leaves the breaker half-open; the store must free
//     the probe token so the next request can probe.
//   - A counted failure while closed: Failures+1; at BreakerFailures (values
//     below 1 act as 1) the breaker opens: OpenedAt = now, ProbeAt = now +
//     BreakerProbeInterval.
//   - A counted failure of the probe: open again for another interval
//     (ProbeAt = now + BreakerProbeInterval, a fixed interval, not a growing
//     cooldown); OpenedAt is kept.
//   - A counted failure of any other attempt while open or half-open (one
//     that was in flight when the breaker opened): Failures+1 only; it does
//     not push the probe time back.
func (b Breaker) Record(p Policy, c Classification, probe bool, now time.Time) Breaker {
	if ResetsBreaker(c) {
		return Breaker{State: BreakerClosed}
	}
	if !CountsTowardBreaker(c) {
		return b
	}
	if b.Failures < math.MaxInt {
		b.Failures++
	}
	switch b.State {
	case BreakerOpen, BreakerHalfOpen:
		if probe {
			b.State = BreakerOpen
			b.ProbeAt = now.Add(p.BreakerProbeInterval)
		}
	default:
		b.State = BreakerClosed
		if b.Failures >= max(p.BreakerFailures, 1) {
			b.State = BreakerOpen
			b.OpenedAt = now
			b.ProbeAt = now.Add(p.BreakerProbeInterval)
		}
	}
	return b
}

// AutoDisable reports whether an endpoint is to be disabled (SPEC.md §6):
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
