package policy

import "time"

// Exhausted reports whether a callout may not be attempted again (contract
// §3): attempts (real dispatches made so far, inline ones included) has
// reached MaxAttempts, or now − firstAttempt ≥ MaxAge. Both bounds are
// inclusive: exactly MaxAge after the first attempt is already too late.
//
// A zero firstAttempt means no attempt has been made yet, so the age window
// has not started and only the count applies.
func Exhausted(p Policy, attempts int, firstAttempt, now time.Time) bool {
	if attempts >= p.MaxAttempts {
		return true
	}
	return !firstAttempt.IsZero() && now.Sub(firstAttempt) >= p.MaxAge
}

// NextAttemptFits reports whether a callout that has made attempts
// dispatches may be rescheduled for an attempt at next (contract §3): false
// when attempts has reached MaxAttempts, or when next is at or after
// firstAttempt + MaxAge. The dispatcher uses it to choose between
// rescheduling and dead-lettering the callout as exhausted; it agrees with
// Exhausted, which would report true at next.
//
// A zero firstAttempt means no attempt has been made yet: only the count
// applies.
func NextAttemptFits(p Policy, attempts int, firstAttempt, next time.Time) bool {
	if attempts >= p.MaxAttempts {
		return false
	}
	return firstAttempt.IsZero() || next.Before(firstAttempt.Add(p.MaxAge))
}
