package policy

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidateDefaults(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("Defaults().Validate() = %v, want nil", err)
	}
}

func TestValidateOneProblem(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Policy)
		want   string
	}{
		{"max_attempts zero", func(p *Policy) { p.MaxAttempts = 0 }, "policy.max_attempts: must be at least 1"},
		{"max_attempts negative", func(p *Policy) { p.MaxAttempts = -1 }, "policy.max_attempts: must be at least 1"},
		{"max_age zero", func(p *Policy) { p.MaxAge = 0 }, "policy.max_age: must be a positive duration"},
		{"base_delay negative", func(p *Policy) { p.BaseDelay = -time.Second }, "policy.base_delay: must be a positive duration"},
		{"multiplier below 1", func(p *Policy) { p.Multiplier = 0.5 }, "policy.multiplier: must be at least 1"},
		{"multiplier zero", func(p *Policy) { p.Multiplier = 0 }, "policy.multiplier: must be at least 1"},
		{"multiplier NaN", func(p *Policy) { p.Multiplier = math.NaN() }, "policy.multiplier: must be a finite number"},
		{"multiplier +Inf", func(p *Policy) { p.Multiplier = math.Inf(1) }, "policy.multiplier: must be a finite number"},
		{"max_delay zero", func(p *Policy) { p.MaxDelay = 0 }, "policy.max_delay: must be a positive duration"},
		{"base_delay above max_delay", func(p *Policy) { p.BaseDelay = 7 * time.Hour }, "policy.base_delay: must not exceed policy.max_delay"},
		{"retry_after_cap zero", func(p *Policy) { p.RetryAfterCap = 0 }, "policy.retry_after_cap: must be a positive duration"},
		{"connect_timeout zero", func(p *Policy) { p.ConnectTimeout = 0 }, "policy.connect_timeout: must be a positive duration"},
		{"header_timeout negative", func(p *Policy) { p.HeaderTimeout = -1 }, "policy.header_timeout: must be a positive duration"},
		{"attempt_timeout zero", func(p *Policy) { p.AttemptTimeout = 0 }, "policy.attempt_timeout: must be a positive duration"},
		{"breaker_failures zero", func(p *Policy) { p.BreakerFailures = 0 }, "policy.breaker_failures: must be at least 1"},
		{"breaker_probe_interval zero", func(p *Policy) { p.BreakerProbeInterval = 0 }, "policy.breaker_probe_interval: must be a positive duration"},
		{"disable_after zero", func(p *Policy) { p.DisableAfter = 0 }, "policy.disable_after: must be a positive duration"},
		{"dead_letter_retention zero", func(p *Policy) { p.DeadLetterRetention = 0 }, "policy.dead_letter_retention: must be a positive duration"},
		{"idempotency_retention zero", func(p *Policy) { p.IdempotencyRetention = 0 }, "policy.idempotency_retention: must be a positive duration"},
		{"max_request_bytes zero", func(p *Policy) { p.MaxRequestBytes = 0 }, "policy.max_request_bytes: must be at least 1 byte"},
		{"max_response_bytes negative", func(p *Policy) { p.MaxResponseBytes = -1 }, "policy.max_response_bytes: must be at least 1 byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Defaults()
			tt.mutate(&p)
			err := p.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Validate() = %q, want %q", err, tt.want)
			}
			fe, ok := errors.AsType[*FieldError](err)
			if !ok || fe.Key+": "+fe.Problem != tt.want {
				t.Errorf("errors.AsType[*FieldError] = %+v, %v", fe, ok)
			}
		})
	}
}

// Boundary values that are valid.
func TestValidateBoundariesAccepted(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Policy)
	}{
		{"one attempt", func(p *Policy) { p.MaxAttempts = 1 }},
		{"multiplier exactly 1", func(p *Policy) { p.Multiplier = 1 }},
		{"base equals max", func(p *Policy) { p.BaseDelay = p.MaxDelay }},
		{"1ns durations", func(p *Policy) { p.MaxAge, p.BaseDelay, p.MaxDelay = 1, 1, 1 }},
		{"one byte bodies", func(p *Policy) { p.MaxRequestBytes, p.MaxResponseBytes = 1, 1 }},
		{"one failure opens", func(p *Policy) { p.BreakerFailures = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Defaults()
			tt.mutate(&p)
			if err := p.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

// Every problem is reported, in key order, one per line.
func TestValidateAllProblems(t *testing.T) {
	err := Policy{}.Validate()
	if err == nil {
		t.Fatal("zero Policy validated")
	}
	want := []string{
		"policy.max_attempts: must be at least 1",
		"policy.max_age: must be a positive duration",
		"policy.base_delay: must be a positive duration",
		"policy.multiplier: must be at least 1",
		"policy.max_delay: must be a positive duration",
		"policy.retry_after_cap: must be a positive duration",
		"policy.connect_timeout: must be a positive duration",
		"policy.header_timeout: must be a positive duration",
		"policy.attempt_timeout: must be a positive duration",
		"policy.breaker_failures: must be at least 1",
		"policy.breaker_probe_interval: must be a positive duration",
		"policy.disable_after: must be a positive duration",
		"policy.dead_letter_retention: must be a positive duration",
		"policy.idempotency_retention: must be a positive duration",
		"policy.max_request_bytes: must be at least 1 byte",
		"policy.max_response_bytes: must be at least 1 byte",
		"policy.max_backlog_items: must be at least 1",
		"policy.max_backlog_bytes: must be at least 1 byte",
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Validate() lines:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != len(want) {
		t.Fatalf("Validate() does not unwrap to %d errors", len(want))
	}
	for i, e := range joined.Unwrap() {
		if fe, ok := e.(*FieldError); !ok || fe.Error() != want[i] {
			t.Errorf("error %d = %#v, want *FieldError %q", i, e, want[i])
		}
	}
}
