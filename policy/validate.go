package policy

import (
	"errors"
	"math"
	"time"
)

// FieldError names one invalid policy setting by its YAML key (contract §10)
// and says what is wrong with it, e.g.
// "policy.max_attempts: must be at least 1".
type FieldError struct {
	// Key is the full YAML key, e.g. "policy.max_attempts".
	Key string
	// Problem says what the value must be, e.g. "must be at least 1".
	Problem string
}

// Error implements error as "<key>: <problem>".
func (e *FieldError) Error() string { return e.Key + ": " + e.Problem }

// Validate checks p as loaded from the `policy:` section (contract §10) and
// returns nil, or every problem found, each a *FieldError, joined with
// errors.Join in the order the keys are documented (one per line; use
// errors.As for the first, or the Unwrap() []error of the result for all).
//
// It rejects: max_attempts < 1; a zero or negative max_age, base_delay,
// max_delay, retry_after_cap, connect_timeout, header_timeout,
// attempt_timeout, breaker_probe_interval, disable_after,
// dead_letter_retention or idempotency_retention; a multiplier below 1, NaN
// or infinite; base_delay > max_delay; breaker_failures < 1; and
// max_request_bytes or max_response_bytes < 1 byte.
func (p Policy) Validate() error {
	var errs []error
	bad := func(key, problem string) {
		errs = append(errs, &FieldError{Key: "policy." + key, Problem: problem})
	}
	// atLeast1 checks a count (unit "") or a size in bytes (unit " byte").
	atLeast1 := func(key string, n int64, unit string) {
		if n < 1 {
			bad(key, "must be at least 1"+unit)
		}
	}
	atLeast1("max_attempts", int64(p.MaxAttempts), "")
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, "must be a positive duration")
		}
	}
	positive("max_age", p.MaxAge)
	positive("base_delay", p.BaseDelay)
	switch {
	case math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0):
		bad("multiplier", "must be a finite number")
	case p.Multiplier < 1:
		bad("multiplier", "must be at least 1")
	}
	positive("max_delay", p.MaxDelay)
	if p.BaseDelay > 0 && p.MaxDelay > 0 && p.BaseDelay > p.MaxDelay {
		bad("base_delay", "must not exceed policy.max_delay")
	}
	positive("retry_after_cap", p.RetryAfterCap)
	positive("connect_timeout", p.ConnectTimeout)
	positive("header_timeout", p.HeaderTimeout)
	positive("attempt_timeout", p.AttemptTimeout)
	atLeast1("breaker_failures", int64(p.BreakerFailures), "")
	positive("breaker_probe_interval", p.BreakerProbeInterval)
	positive("disable_after", p.DisableAfter)
	positive("dead_letter_retention", p.DeadLetterRetention)
	positive("idempotency_retention", p.IdempotencyRetention)
	atLeast1("max_request_bytes", p.MaxRequestBytes, " byte")
	atLeast1("max_response_bytes", p.MaxResponseBytes, " byte")
	atLeast1("max_backlog_items", p.MaxBacklogItems, "")
	atLeast1("max_backlog_bytes", p.MaxBacklogBytes, " byte")
	if p.MaxBacklogItemsPerIssuer < 0 {
		bad("max_backlog_items_per_issuer", "must not be negative; 0 means a fair share")
	}
	if p.MaxBacklogBytesPerIssuer < 0 {
		bad("max_backlog_bytes_per_issuer", "must not be negative; 0 means a fair share")
	}
	return errors.Join(errs...)
}
