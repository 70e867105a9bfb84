package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// attemptNumbers are the attempt counters every backoff test walks,
// including the corrupted ones.
var attemptNumbers = []int{math.MinInt, -1000, -1, 0, 1, 2, 3, 11, 12, 13, 14, 31, 32, 40, 62, 63, 64, 65, 1000, 1 << 40, math.MaxInt - 1, math.MaxInt}

func withBackoff(base time.Duration, mult float64, maxDelay time.Duration) Policy {
	p := Defaults()
	p.BaseDelay, p.Multiplier, p.MaxDelay = base, mult, maxDelay
	return p
}

func TestCeiling(t *testing.T) {
	def := Defaults()
	x10 := withBackoff(5*time.Second, 10, 6*time.Hour)
	x1 := withBackoff(5*time.Second, 1, 6*time.Hour)
	tiny := withBackoff(1, 2, math.MaxInt64)
	tests := []struct {
		name    string
		p       Policy
		attempt int
		want    time.Duration
	}{
		{"defaults attempt MinInt", def, math.MinInt, 5 * time.Second},
		{"defaults attempt -1", def, -1, 5 * time.Second},
		{"defaults attempt 0", def, 0, 5 * time.Second},
		{"defaults attempt 1", def, 1, 5 * time.Second},
		{"defaults attempt 2", def, 2, 10 * time.Second},
		{"defaults attempt 3", def, 3, 20 * time.Second},
		{"defaults attempt 11", def, 11, 5120 * time.Second},
		{"defaults attempt 12", def, 12, 10240 * time.Second},
		{"defaults attempt 13", def, 13, 20480 * time.Second},
		{"defaults attempt 14 capped", def, 14, 6 * time.Hour},
		{"defaults attempt 31", def, 31, 6 * time.Hour},
		{"defaults attempt 40", def, 40, 6 * time.Hour},
		{"defaults attempt 63", def, 63, 6 * time.Hour},
		{"defaults attempt 64", def, 64, 6 * time.Hour},
		{"defaults attempt 1000", def, 1000, 6 * time.Hour},
		{"defaults attempt MaxInt", def, math.MaxInt, 6 * time.Hour},
		{"x10 attempt 1", x10, 1, 5 * time.Second},
		{"x10 attempt 2", x10, 2, 50 * time.Second},
		{"x10 attempt 4", x10, 4, 5000 * time.Second},
		{"x10 attempt 5 capped", x10, 5, 6 * time.Hour},
		{"x10 attempt MaxInt", x10, math.MaxInt, 6 * time.Hour},
		{"x1 attempt 1", x1, 1, 5 * time.Second},
		{"x1 attempt 1000", x1, 1000, 5 * time.Second},
		{"x1 attempt MaxInt", x1, math.MaxInt, 5 * time.Second},
		{"x1.5 attempt 3", withBackoff(4*time.Second, 1.5, time.Hour), 3, 9 * time.Second},
		{"1ns x2 attempt 62", tiny, 62, 1 << 61},
		{"1ns x2 attempt 63", tiny, 63, 1 << 62},
		{"1ns x2 attempt 64 saturates", tiny, 64, math.MaxInt64},
		{"1ns x2 attempt MaxInt", tiny, math.MaxInt, math.MaxInt64},
		{"multiplier below 1", withBackoff(5*time.Second, 0.5, time.Hour), 10, 5 * time.Second},
		{"multiplier NaN", withBackoff(5*time.Second, math.NaN(), time.Hour), 10, 5 * time.Second},
		{"multiplier +Inf attempt 1", withBackoff(5*time.Second, math.Inf(1), time.Hour), 1, 5 * time.Second},
		{"multiplier +Inf attempt 2", withBackoff(5*time.Second, math.Inf(1), time.Hour), 2, time.Hour},
		{"base above max", withBackoff(2*time.Hour, 2, time.Hour), 1, time.Hour},
		{"base zero", withBackoff(0, 2, time.Hour), 5, 0},
		{"base negative", withBackoff(-time.Second, 2, time.Hour), 5, 0},
		{"max zero", withBackoff(time.Second, 2, 0), 5, 0},
		{"max negative", withBackoff(time.Second, 2, -time.Hour), 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Ceiling(tt.p, tt.attempt); got != tt.want {
				t.Errorf("Ceiling(attempt %d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

// For every policy shape and attempt number the ceiling stays within
// [0, MaxDelay] and never shrinks as attempts grow.
func TestCeilingBoundedAndMonotone(t *testing.T) {
	policies := []Policy{
		Defaults(),
		withBackoff(5*time.Second, 10, 6*time.Hour),
		withBackoff(5*time.Second, 1, 6*time.Hour),
		withBackoff(1, 1.0000001, math.MaxInt64),
		withBackoff(time.Millisecond, 1e300, math.MaxInt64),
		withBackoff(time.Hour, 3, math.MaxInt64),
	}
	for i, p := range policies {
		t.Run(fmt.Sprintf("policy %d", i), func(t *testing.T) {
			for _, n := range attemptNumbers {
				if c := Ceiling(p, n); c < 0 || c > p.MaxDelay {
					t.Errorf("Ceiling(attempt %d) = %v, outside [0, %v]", n, c, p.MaxDelay)
				}
			}
			prev := time.Duration(0)
			for n := 1; n <= 200; n++ {
				c := Ceiling(p, n)
				if c < prev {
					t.Fatalf("Ceiling(attempt %d) = %v < Ceiling(attempt %d) = %v", n, c, n-1, prev)
				}
				prev = c
			}
		})
	}
}

func constRand(v float64) func() float64 { return func() float64 { return v } }

func TestNextDelay(t *testing.T) {
	def := Defaults()
	wideCap := withBackoff(time.Second, 2, time.Minute) // RetryAfterCap 1h > MaxDelay 1m
	tests := []struct {
		name    string
		p       Policy
		attempt int
		ra      time.Duration
		haveRA  bool
		rnd     func() float64
		want    time.Duration
	}{
		{"rnd 0 attempt 1", def, 1, 0, false, constRand(0), 0},
		{"rnd 0.5 attempt 1", def, 1, 0, false, constRand(0.5), 2500 * time.Millisecond},
		{"rnd 0.999999 attempt 1", def, 1, 0, false, constRand(0.999999), 4999995000},
		{"rnd 0.999999 attempt 12", def, 12, 0, false, constRand(0.999999), 10239989760000},
		{"rnd 0.999999 attempt MaxInt", def, math.MaxInt, 0, false, constRand(0.999999), 21599978400000},
		{"rnd 0.999999 attempt MinInt", def, math.MinInt, 0, false, constRand(0.999999), 4999995000},
		{"rnd 0.5 attempt 0", def, 0, 0, false, constRand(0.5), 2500 * time.Millisecond},
		{"rnd 0.5 attempt -1", def, -1, 0, false, constRand(0.5), 2500 * time.Millisecond},
		{"rnd 0.5 attempt 64", def, 64, 0, false, constRand(0.5), 3 * time.Hour},
		{"rnd 0.5 attempt 1000", def, 1000, 0, false, constRand(0.5), 3 * time.Hour},
		{"multiplier 10 attempt 3 rnd 0.5", withBackoff(5*time.Second, 10, 6*time.Hour), 3, 0, false, constRand(0.5), 250 * time.Second},
		{"multiplier 1 attempt 40 rnd 0.5", withBackoff(5*time.Second, 1, 6*time.Hour), 40, 0, false, constRand(0.5), 2500 * time.Millisecond},
		{"nil rnd gives the ceiling", def, 2, 0, false, nil, 10 * time.Second},
		{"rnd 1 clamps to ceiling", def, 2, 0, false, constRand(1), 10 * time.Second},
		{"rnd 7 clamps to ceiling", def, 2, 0, false, constRand(7), 10 * time.Second},
		{"rnd negative clamps to 0", def, 2, 0, false, constRand(-0.3), 0},
		{"rnd NaN clamps to 0", def, 2, 0, false, constRand(math.NaN()), 0},
		{"rnd +Inf clamps to ceiling", def, 2, 0, false, constRand(math.Inf(1)), 10 * time.Second},
		{"retry-after below cap beats small jitter", def, 1, 30 * time.Minute, true, constRand(0.5), 30 * time.Minute},
		{"retry-after above cap is capped", def, 1, 2 * time.Hour, true, constRand(0.5), time.Hour},
		{"retry-after exactly cap", def, 1, time.Hour, true, constRand(0), time.Hour},
		{"retry-after huge is capped", def, 1, math.MaxInt64, true, constRand(0), time.Hour},
		{"jitter beats retry-after", def, 14, 30 * time.Minute, true, constRand(0.5), 3 * time.Hour},
		{"jitter beats capped retry-after", def, 1000, 5 * time.Hour, true, constRand(0.999999), 21599978400000},
		{"retry-after ignored when absent", def, 1, 30 * time.Minute, false, constRand(0.5), 2500 * time.Millisecond},
		{"retry-after zero adds nothing", def, 1, 0, true, constRand(0.5), 2500 * time.Millisecond},
		{"retry-after negative adds nothing", def, 1, -time.Hour, true, constRand(0.5), 2500 * time.Millisecond},
		{"retry-after over small max_delay", wideCap, 1000, 30 * time.Minute, true, constRand(0.5), 30 * time.Minute},
		{"retry-after capped above max_delay", wideCap, 1000, 3 * time.Hour, true, constRand(0.5), time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NextDelay(tt.p, tt.attempt, tt.ra, tt.haveRA, tt.rnd)
			if got != tt.want {
				t.Errorf("NextDelay(attempt %d, ra %v/%v) = %v (%d ns), want %v", tt.attempt, tt.ra, tt.haveRA, got, int64(got), tt.want)
			}
		})
	}
}

// Over many draws, every attempt number and Retry-After, the delay stays in
// [0, max(MaxDelay, RetryAfterCap)], under the ceiling without Retry-After,
// and at least the capped Retry-After with one.
func TestNextDelayBounds(t *testing.T) {
	src := rand.New(rand.NewPCG(1, 2))
	policies := []Policy{Defaults(), withBackoff(time.Second, 2, time.Minute), withBackoff(1, 10, math.MaxInt64)}
	retryAfters := []time.Duration{-time.Hour, 0, time.Second, 59 * time.Minute, time.Hour, 25 * time.Hour, math.MaxInt64}
	draws := []float64{0, 0.999999, 1 - 1e-16}
	for i := 0; i < 50; i++ {
		draws = append(draws, src.Float64())
	}
	for i, p := range policies {
		limit := max(p.MaxDelay, p.RetryAfterCap)
		for _, n := range attemptNumbers {
			for _, r := range draws {
				for _, ra := range retryAfters {
					for _, have := range []bool{false, true} {
						d := NextDelay(p, n, ra, have, constRand(r))
						if d < 0 || d > limit {
							t.Fatalf("policy %d attempt %d rnd %v ra %v/%v: %v outside [0, %v]", i, n, r, ra, have, d, limit)
						}
						if !have && d > Ceiling(p, n) {
							t.Fatalf("policy %d attempt %d rnd %v: %v above ceiling %v", i, n, r, d, Ceiling(p, n))
						}
						if floor := min(ra, p.RetryAfterCap); have && ra > 0 && d < floor {
							t.Fatalf("policy %d attempt %d rnd %v ra %v: %v below %v", i, n, r, ra, d, floor)
						}
					}
				}
			}
		}
	}
}
