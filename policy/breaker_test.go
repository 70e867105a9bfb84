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

var breakerT = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

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
