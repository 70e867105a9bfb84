package policy

import (
	"fmt"
	"testing"
	"time"
)

func TestCountsTowardBreaker(t *testing.T) {
	tests := []struct {
		c      Classification
		counts bool
	}{
		{Classify(200, nil), false},
		{Classify(204, nil), false},
		{Classify(500, nil), true},
		{Classify(502, nil), true},
		{Classify(503, nil), true},
		{Classify(504, nil), true},
		{Classify(408, nil), true},
		{Classify(429, nil), false},
		{Classify(400, nil), false},
		{Classify(404, nil), false},
		{Classify(501, nil), false},
		{Classify(505, nil), false},
		{Classify(301, nil), false},
		{Classify(100, nil), false},
		{Classification{Permanent, ReasonResponseTooLarge}, false},
		{Classification{Retryable, ReasonDNS}, true},
		{Classification{Retryable, ReasonConnectRefused}, true},
		{Classification{Retryable, ReasonUnreachable}, true},
		{Classification{Retryable, ReasonConnectTimeout}, true},
		{Classification{Retryable, ReasonTLS}, true},
		{Classification{Retryable, ReasonReset}, true},
		{Classification{Retryable, ReasonEOF}, true},
		{Classification{Retryable, ReasonHeaderTimeout}, true},
		{Classification{Retryable, ReasonAttemptTimeout}, true},
		{Classification{Retryable, ReasonNetwork}, true},
		{Classification{Retryable, ReasonCredentials}, true},
		{Classification{Retryable, ReasonCanceled}, false},
		{Classification{Retryable, ReasonOverloaded}, false},
		{Classify(0, fmt.Errorf("the upstream's response was not buffered: %w", ErrOverloaded)), false},
		{Classification{Rejected, "breaker_open"}, false},
		{Classification{}, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.c.Outcome)+"/"+tt.c.Reason, func(t *testing.T) {
			if got := CountsTowardBreaker(tt.c); got != tt.counts {
				t.Errorf("CountsTowardBreaker(%+v) = %v, want %v", tt.c, got, tt.counts)
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
