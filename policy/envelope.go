package policy

import (
	"encoding/json"
	"math"
	"time"
)

// Envelope is the span a callout's backoff gaps can take in all, published
// at GET /v1/policy (contract §3): the sum of the MaxAttempts−1 gaps between
// attempts, with no Retry-After, no breaker hold and no time spent in the
// attempts themselves.
//
// In JSON the durations are whole milliseconds (truncated):
//
//	{"gaps":11,"shortest_ms":0,"mean_ms":5117500,"longest_ms":10235000}
type Envelope struct {
	// Gaps is the number of backoff gaps, MaxAttempts − 1 (0 when
	// MaxAttempts ≤ 1).
	Gaps int
	// Shortest is the least total wait: 0, since full jitter can draw 0.
	Shortest time.Duration
	// Mean is the expected total wait, Σ Ceiling/2, capped at MaxAge.
	Mean time.Duration
	// Longest is the greatest total wait, Σ Ceiling, capped at MaxAge.
	Longest time.Duration
}

// envelopeJSON is Envelope's wire form, durations in milliseconds.
type envelopeJSON struct {
	Gaps       int   `json:"gaps"`
	ShortestMS int64 `json:"shortest_ms"`
	MeanMS     int64 `json:"mean_ms"`
	LongestMS  int64 `json:"longest_ms"`
}

// MarshalJSON writes the envelope with its durations in whole milliseconds
// (keys gaps, shortest_ms, mean_ms, longest_ms). It never fails.
func (e Envelope) MarshalJSON() ([]byte, error) {
	return json.Marshal(envelopeJSON{
		Gaps:       e.Gaps,
		ShortestMS: e.Shortest.Milliseconds(),
		MeanMS:     e.Mean.Milliseconds(),
		LongestMS:  e.Longest.Milliseconds(),
	})
}

// UnmarshalJSON reads what MarshalJSON writes (for calloutctl and tests). It
// returns the decoder's error for malformed JSON or a field of the wrong
// type; unknown keys are ignored.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	var w envelopeJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Envelope{
		Gaps:     w.Gaps,
		Shortest: time.Duration(w.ShortestMS) * time.Millisecond,
		Mean:     time.Duration(w.MeanMS) * time.Millisecond,
		Longest:  time.Duration(w.LongestMS) * time.Millisecond,
	}
	return nil
}

// BackoffEnvelope returns the envelope of p's backoff (contract §3): over the
// MaxAttempts−1 gaps, Shortest 0, Mean Σ Ceiling(p, n)/2 and Longest
// Σ Ceiling(p, n) for n = 1…MaxAttempts−1, each capped at MaxAge. With the
// defaults that is 11 gaps, Longest 5 s·(2¹¹−1) = 10235 s ≈ 2.84 h and Mean
// half that.
//
// It runs in bounded time for any MaxAttempts and never overflows: the sum
// saturates, and past exactGaps uncapped gaps the rest of the geometric
// series is summed in closed form (float64, so exact to about 1 part in
// 10¹⁵ there; exact integer sums below).
func BackoffEnvelope(p Policy) Envelope {
	gaps := max(p.MaxAttempts-1, 0)
	sum := backoffSum(p, gaps, exactGaps)
	capAge := func(d time.Duration) time.Duration { return max(min(d, p.MaxAge), 0) }
	return Envelope{Gaps: gaps, Shortest: 0, Mean: capAge(sum / 2), Longest: capAge(sum)}
}

// exactGaps is how many gaps backoffSum adds one by one before it sums the
// rest in closed form.
const exactGaps = 4096

// backoffSum returns Σ Ceiling(p, n) for n = 1…gaps, saturating at
// math.MaxInt64, adding at most limit terms one by one.
func backoffSum(p Policy, gaps, limit int) time.Duration {
	var sum time.Duration
	for n := 1; n <= gaps; n++ {
		c := Ceiling(p, n)
		rest := gaps - n + 1
		if c <= 0 || c >= p.MaxDelay || !(p.Multiplier > 1) {
			// Every remaining gap has this same ceiling.
			return addSat(sum, mulSat(c, rest))
		}
		if n > limit {
			return addSat(sum, floatSat(geometricTail(p, n, gaps)))
		}
		sum = addSat(sum, c)
	}
	return sum
}

// geometricTail returns Σ Ceiling(p, n) for n = from…to in float64
// nanoseconds, for 0 < BaseDelay < MaxDelay and Multiplier > 1: the uncapped
// terms as a geometric series, then MaxDelay for each capped one.
func geometricTail(p Policy, from, to int) float64 {
	base, maxd, m := float64(p.BaseDelay), float64(p.MaxDelay), p.Multiplier
	// firstCapped is the first n with base·m^(n−1) ≥ maxd.
	firstCapped := 1 + math.Ceil(math.Log(maxd/base)/math.Log(m))
	f, t := float64(from), float64(to)
	var s float64
	if last := math.Min(t, firstCapped-1); last >= f {
		s = base * math.Pow(m, f-1) * (math.Pow(m, last-f+1) - 1) / (m - 1)
	}
	if capped := t - math.Max(f, firstCapped) + 1; capped > 0 {
		s += capped * maxd
	}
	return s
}

// addSat adds two non-negative durations, saturating at math.MaxInt64.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat multiplies a non-negative duration by a non-negative count,
// saturating at math.MaxInt64.
func mulSat(d time.Duration, n int) time.Duration {
	if d <= 0 || n <= 0 {
		return 0
	}
	if int64(d) > math.MaxInt64/int64(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// floatSat converts non-negative float64 nanoseconds to a Duration,
// saturating at math.MaxInt64 (NaN gives 0).
func floatSat(f float64) time.Duration {
	if !(f > 0) {
		return 0
	}
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f)
}
