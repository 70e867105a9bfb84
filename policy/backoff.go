package policy

import (
	"math"
	"time"
)

// Ceiling returns the backoff ceiling for the gap after attempt n (contract
// §3): min(MaxDelay, BaseDelay · Multiplier^(n−1)), so attempt 1 gives
// BaseDelay. It is the upper bound that full jitter draws under.
//
// It is computed in float64 and compared with MaxDelay before any conversion
// back to a Duration, so no n overflows: a huge n (math.MaxInt) saturates at
// MaxDelay, and n ≤ 0 — a corrupted or unset counter — is treated as 1.
// Degenerate policies stay bounded too: a Multiplier below 1 or NaN counts as
// 1 (a constant BaseDelay), a BaseDelay above MaxDelay gives MaxDelay, and a
// non-positive BaseDelay or MaxDelay gives 0. The result is always within
// [0, max(0, MaxDelay)].
func Ceiling(p Policy, attempt int) time.Duration {
	if p.BaseDelay <= 0 || p.MaxDelay <= 0 {
		return 0
	}
	if p.BaseDelay >= p.MaxDelay {
		return p.MaxDelay
	}
	if attempt < 1 {
		attempt = 1
	}
	if !(p.Multiplier > 1) { // also NaN
		return p.BaseDelay
	}
	c := float64(p.BaseDelay) * math.Pow(p.Multiplier, float64(attempt-1))
	if !(c < float64(p.MaxDelay)) { // also +Inf and NaN
		return p.MaxDelay
	}
	return min(time.Duration(c), p.MaxDelay)
}

// NextDelay returns how long to wait after attempt n before attempt n+1
// (contract §3): full jitter, uniform(0, Ceiling(p, n)), and with a
// Retry-After (haveRetryAfter true, as ParseRetryAfter reports it)
// max(jittered, min(retryAfter, RetryAfterCap)).
//
// rnd is the injected random source and must return a value in [0, 1), like
// math/rand/v2's Float64; a value of 1 or more is clamped to the ceiling, a
// negative or NaN one to 0. A nil rnd means no jitter: the ceiling itself (the
// longest, most conservative wait). A non-positive retryAfter adds nothing,
// nor does a non-positive RetryAfterCap.
//
// The result is never negative and never above max(0, MaxDelay,
// RetryAfterCap).
func NextDelay(p Policy, attempt int, retryAfter time.Duration, haveRetryAfter bool, rnd func() float64) time.Duration {
	d := jitter(Ceiling(p, attempt), rnd)
	if haveRetryAfter && retryAfter > 0 && p.RetryAfterCap > 0 {
		d = max(d, min(retryAfter, p.RetryAfterCap))
	}
	return d
}

// jitter draws uniformly from [0, ceiling) with rnd, clamped to
// [0, ceiling]; nil rnd gives the ceiling.
func jitter(ceiling time.Duration, rnd func() float64) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	if rnd == nil {
		return ceiling
	}
	r := rnd()
	if !(r > 0) { // also NaN
		return 0
	}
	f := r * float64(ceiling)
	if !(f < float64(ceiling)) {
		return ceiling
	}
	return min(time.Duration(f), ceiling)
}
