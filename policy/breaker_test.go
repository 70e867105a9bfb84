package policy

import (
	"testing"
	"time"
)

func TestCountsAndResets(t *testing.T) {
	tests := []struct {
		c      Classification
		counts bool
		resets bool
	}{
		{Classify(200, nil), false, true},
		{Classify(204, nil), false, true},
		{Classify(500, nil), true, false},
		{Classify(502, nil), true, false},
		{Classify(503, nil), true, false},
		{Classify(504, nil), true, false},
		{Classify(408, nil), true, false},
		{Classify(429, nil), false, false},
		{Classify(400, nil), false, false},
		{Classify(404, nil), false, false},
		{Classify(501, nil), false, false},
		{Classify(505, nil), false, false},
		{Classify(301, nil), false, false},
		{Classify(100, nil), false, false},
		{Classification{Permanent, ReasonResponseTooLarge}, false, false},
		{Classification{Retryable, ReasonDNS}, true, false},
		{Classification{Retryable, ReasonConnectRefused}, true, false},
		{Classification{Retryable, ReasonUnreachable}, true, false},
		{Classification{Retryable, ReasonConnectTimeout}, true, false},
		{Classification{Retryable, ReasonTLS}, true, false},
		{Classification{Retryable, ReasonReset}, true, false},
		{Classification{Retryable, ReasonEOF}, true, false},
		{Classification{Retryable, ReasonHeaderTimeout}, true, false},
		{Classification{Retryable, ReasonAttemptTimeout}, true, false},
		{Classification{Retryable, ReasonNetwork}, true, false},
		{Classification{Retryable, ReasonCredentials}, true, false},
		{Classification{Retryable, ReasonCanceled}, false, false},
		{Classification{Rejected, "breaker_open"}, false, false},
		{Classification{}, false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.c.Outcome)+"/"+tt.c.Reason, func(t *testing.T) {
			if got := CountsTowardBreaker(tt.c); got != tt.counts {
				t.Errorf("CountsTowardBreaker(%+v) = %v, want %v", tt.c, got, tt.counts)
			}
			if got := ResetsBreaker(tt.c); got != tt.resets {
				t.Errorf("ResetsBreaker(%+v) = %v, want %v", tt.c, got, tt.resets)
			}
		})
	}
}

var (
	c503     = Classification{Retryable, ReasonStatus5xx}
	c429     = Classification{Retryable, ReasonStatus429}
	c400     = Classification{Permanent, ReasonStatus4xx}
	c200     = Classification{Success, ReasonStatus2xx}
	cCancel  = Classification{Retryable, ReasonCanceled}
	breakerT = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

func TestBreakerRecord(t *testing.T) {
	p := Defaults() // 20 failures, 5 min probe interval
	at := func(d time.Duration) time.Time { return breakerT.Add(d) }
	open := Breaker{State: BreakerOpen, Failures: 20, OpenedAt: at(0), ProbeAt: at(5 * time.Minute)}
	tests := []struct {
		name  string
		p     Policy
		start Breaker
		c     Classification
		probe bool
		now   time.Time
		want  Breaker
	}{
		{"first failure", p, Breaker{}, c503, false, at(0), Breaker{State: BreakerClosed, Failures: 1}},
		{"19th failure stays closed", p, Breaker{State: BreakerClosed, Failures: 18}, c503, false, at(0), Breaker{State: BreakerClosed, Failures: 19}},
		{"20th failure opens", p, Breaker{State: BreakerClosed, Failures: 19}, c503, false, at(0), open},
		{"429 never counts", p, Breaker{State: BreakerClosed, Failures: 19}, c429, false, at(0), Breaker{State: BreakerClosed, Failures: 19}},
		{"permanent neither counts nor resets", p, Breaker{State: BreakerClosed, Failures: 19}, c400, false, at(0), Breaker{State: BreakerClosed, Failures: 19}},
		{"canceled neither counts nor resets", p, Breaker{State: BreakerClosed, Failures: 19}, cCancel, false, at(0), Breaker{State: BreakerClosed, Failures: 19}},
		{"success resets the streak", p, Breaker{State: BreakerClosed, Failures: 19}, c200, false, at(0), Breaker{State: BreakerClosed}},
		{"success from zero", p, Breaker{}, c200, false, at(0), Breaker{State: BreakerClosed}},
		{"straggler failure while open keeps probe time", p, open, c503, false, at(time.Minute),
			Breaker{State: BreakerOpen, Failures: 21, OpenedAt: at(0), ProbeAt: at(5 * time.Minute)}},
		{"straggler success while open closes", p, open, c200, false, at(time.Minute), Breaker{State: BreakerClosed}},
		{"probe failure reopens for one interval, keeps opened_at", p, open, c503, true, at(6 * time.Minute),
			Breaker{State: BreakerOpen, Failures: 21, OpenedAt: at(0), ProbeAt: at(11 * time.Minute)}},
		{"probe failure from stored half_open", p, Breaker{State: BreakerHalfOpen, Failures: 20, OpenedAt: at(0), ProbeAt: at(5 * time.Minute)}, c503, true, at(6 * time.Minute),
			Breaker{State: BreakerOpen, Failures: 21, OpenedAt: at(0), ProbeAt: at(11 * time.Minute)}},
		{"probe success closes", p, open, c200, true, at(6 * time.Minute), Breaker{State: BreakerClosed}},
		{"probe permanent leaves it half-open", p, open, c400, true, at(6 * time.Minute), open},
		{"probe 429 leaves it half-open", p, open, c429, true, at(6 * time.Minute), open},
		{"breaker_failures 0 acts as 1", func() Policy { q := p; q.BreakerFailures = 0; return q }(), Breaker{}, c503, false, at(0),
			Breaker{State: BreakerOpen, Failures: 1, OpenedAt: at(0), ProbeAt: at(5 * time.Minute)}},
		{"unknown stored state reads as closed", p, Breaker{State: "weird", Failures: 3}, c503, false, at(0), Breaker{State: BreakerClosed, Failures: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.start.Record(tt.p, tt.c, tt.probe, tt.now); got != tt.want {
				t.Errorf("Record = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Twenty consecutive retryable failures, with 429s and permanents mixed in,
// open the breaker; a success in between starts the count again.
func TestBreakerSequence(t *testing.T) {
	p := Defaults()
	var b Breaker
	now := breakerT
	for i := range 19 {
		b = b.Record(p, c503, false, now)
		b = b.Record(p, c429, false, now)
		b = b.Record(p, c400, false, now)
		if b.At(now) != BreakerClosed || b.Failures != i+1 {
			t.Fatalf("after %d failures: %+v", i+1, b)
		}
	}
	b = b.Record(p, c200, false, now)
	if b.Failures != 0 {
		t.Fatalf("success did not reset: %+v", b)
	}
	for range 20 {
		b = b.Record(p, c503, false, now)
	}
	if b.At(now) != BreakerOpen || !b.OpenedAt.Equal(now) {
		t.Fatalf("20 failures did not open at %v: %+v", now, b)
	}
}

func TestBreakerAtAndUntilProbe(t *testing.T) {
	at := func(d time.Duration) time.Time { return breakerT.Add(d) }
	open := Breaker{State: BreakerOpen, Failures: 20, OpenedAt: at(0), ProbeAt: at(5 * time.Minute)}
	tests := []struct {
		name  string
		b     Breaker
		now   time.Time
		state BreakerState
		until time.Duration
	}{
		{"zero value", Breaker{}, at(0), BreakerClosed, 0},
		{"closed", Breaker{State: BreakerClosed, Failures: 7}, at(0), BreakerClosed, 0},
		{"just opened", open, at(0), BreakerOpen, 5 * time.Minute},
		{"1ns before probe", open, at(5*time.Minute - 1), BreakerOpen, 1},
		{"at probe time", open, at(5 * time.Minute), BreakerHalfOpen, 0},
		{"after probe time", open, at(time.Hour), BreakerHalfOpen, 0},
		{"stored half_open", Breaker{State: BreakerHalfOpen, ProbeAt: at(time.Hour)}, at(0), BreakerHalfOpen, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.At(tt.now); got != tt.state {
				t.Errorf("At = %q, want %q", got, tt.state)
			}
			if got := tt.b.UntilProbe(tt.now); got != tt.until {
				t.Errorf("UntilProbe = %v, want %v", got, tt.until)
			}
		})
	}
}

func TestAutoDisable(t *testing.T) {
	p := Defaults() // disable_after 72h
	at := func(h time.Duration) time.Time { return breakerT.Add(h * time.Hour) }
	var never time.Time
	tests := []struct {
		name         string
		lastSuccess  time.Time
		firstFailure time.Time
		now          time.Time
		want         bool
	}{
		{"no failures, no success", never, never, at(1000), false},
		{"no failures since success", at(0), never, at(1000), false},
		{"never a success, failing 71h", never, at(0), at(71), false},
		{"never a success, failing exactly 72h", never, at(0), at(72), true},
		{"never a success, failing 73h", never, at(0), at(73), true},
		{"success 71h ago, failing for 70h", at(0), at(1), at(71), false},
		{"success 73h ago, failing for exactly 72h", at(0), at(1), at(73), true},
		{"success 100h ago, first failure just now: idle is not failing", at(0), at(100), at(100), false},
		{"success 100h ago, failing for 72h since", at(0), at(100), at(172), true},
		{"failure before the last success is an old outage", at(10), at(5), at(200), false},
		{"failure at the same instant as the success", at(10), at(10), at(200), false},
		{"1ns short", at(0), at(1), at(73).Add(-1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AutoDisable(p, tt.lastSuccess, tt.firstFailure, tt.now); got != tt.want {
				t.Errorf("AutoDisable = %v, want %v", got, tt.want)
			}
		})
	}
}
