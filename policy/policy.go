// Package policy is the proxy's domain, the package at the centre: the
// callout's types and its life (Callout, State, Kind, Attempt, Response,
// Claimed, DeadLetterReason, the replay job, the store's errors and the
// Failed_Callout__c status values) and the pure decisions about it: how an
// attempt's outcome is classified (Classify), how long to wait before the
// next attempt (NextDelay), when a callout is exhausted, what an attempt
// leads to (Decide), whether it counts toward the circuit breaker, and when
// an endpoint is auto-disabled. The storage adapter (proxy/redisstore)
// stores these types; the ingress, the dispatcher and the admin API call
// this package, not each other (ARCHITECTURE.md).
//
// It does no I/O and imports nothing of ours; the clock and the random source
// are always passed in. The rules come from the product contract
// (docs/contract.md: outcome classes, retry policy, breaker) and the RFCs
// each function names.
package policy

import "time"

// Policy is the retry, breaker and size policy in force, as configured under
// the `policy:` key (contract §10). Durations are Go durations; sizes are bytes.
// The zero value is not useful: start from Defaults and override.
type Policy struct {
	// MaxAttempts is the number of real dispatches a callout may have in all,
	// inline ones included (contract §3). Default 12.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// MaxAge is how long after its first attempt a callout may still be
	// attempted (contract §3). Default 72h.
	MaxAge time.Duration `yaml:"max_age" json:"max_age"`
	// BaseDelay is the backoff ceiling before attempt 2. Default 5s.
	BaseDelay time.Duration `yaml:"base_delay" json:"base_delay"`
	// Multiplier grows the ceiling between attempts. Default 2.
	Multiplier float64 `yaml:"multiplier" json:"multiplier"`
	// MaxDelay caps the backoff ceiling. Default 6h.
	MaxDelay time.Duration `yaml:"max_delay" json:"max_delay"`
	// RetryAfterCap caps how long an upstream's Retry-After is honoured
	// (RFC 9110 §10.2.3). Default 1h.
	RetryAfterCap time.Duration `yaml:"retry_after_cap" json:"retry_after_cap"`
	// ConnectTimeout limits the TCP (and TLS) connect of one attempt. Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout" json:"connect_timeout"`
	// HeaderTimeout limits the wait for response headers after the request
	// was written. Default 10s.
	HeaderTimeout time.Duration `yaml:"header_timeout" json:"header_timeout"`
	// AttemptTimeout limits one whole attempt, body included. Default 15s.
	AttemptTimeout time.Duration `yaml:"attempt_timeout" json:"attempt_timeout"`
	// BreakerFailures is the number of consecutive retryable failures that
	// opens an endpoint's circuit breaker (contract §6). Default 20.
	BreakerFailures int `yaml:"breaker_failures" json:"breaker_failures"`
	// BreakerProbeInterval is how long an open breaker waits before it lets
	// one probe through, and again after a failed probe. Default 5m.
	BreakerProbeInterval time.Duration `yaml:"breaker_probe_interval" json:"breaker_probe_interval"`
	// DisableAfter disables an endpoint that has failed with no success for
	// this long (contract §6). Default 72h.
	DisableAfter time.Duration `yaml:"disable_after" json:"disable_after"`
	// DeadLetterRetention is how long the proxy keeps a dead letter. Default 720h.
	DeadLetterRetention time.Duration `yaml:"dead_letter_retention" json:"dead_letter_retention"`
	// IdempotencyRetention is how long an idempotency record outlives its
	// finished callout (contract §5). Default 24h.
	IdempotencyRetention time.Duration `yaml:"idempotency_retention" json:"idempotency_retention"`
	// MaxRequestBytes is the largest request body accepted, in bytes.
	// Default 12582912 (12 MiB, Apex's asynchronous heap limit).
	MaxRequestBytes int64 `yaml:"max_request_bytes" json:"max_request_bytes"`
	// MaxResponseBytes is the largest upstream response body buffered, in
	// bytes; a larger one is a permanent failure. Default 12582912.
	MaxResponseBytes int64 `yaml:"max_response_bytes" json:"max_response_bytes"`
	// MaxBacklogItems caps one endpoint's pending callouts (scheduled, held,
	// in flight); past it new callouts are rejected backlog-full. Default
	// 100000.
	MaxBacklogItems int64 `yaml:"max_backlog_items" json:"max_backlog_items"`
	// MaxBacklogBytes caps the bytes Redis holds for one endpoint's pending
	// callouts and dead letters: method, path, headers, body, attempt log,
	// last response and a fixed per-record overhead (contract §10). Default
	// 1073741824 (1 GiB).
	MaxBacklogBytes int64 `yaml:"max_backlog_bytes" json:"max_backlog_bytes"`
	// MaxBacklogItemsPerIssuer caps one caller organisation's (JWT issuer's)
	// pending callouts on one endpoint, so one org cannot fill an endpoint
	// that others share (contract §10). Default 0: a fair share, the endpoint's
	// max_backlog_items divided by the number of issuers allowed on it (no
	// separate cap when only one is).
	MaxBacklogItemsPerIssuer int64 `yaml:"max_backlog_items_per_issuer" json:"max_backlog_items_per_issuer"`
	// MaxBacklogBytesPerIssuer caps one organisation's stored bytes on one
	// endpoint, as MaxBacklogBytes counts them. Default 0: a fair share of
	// max_backlog_bytes, as for items.
	MaxBacklogBytesPerIssuer int64 `yaml:"max_backlog_bytes_per_issuer" json:"max_backlog_bytes_per_issuer"`
}

// Defaults returns the contract's default policy (contract §10).
func Defaults() Policy {
	return Policy{
		MaxAttempts:          12,
		MaxAge:               72 * time.Hour,
		BaseDelay:            5 * time.Second,
		Multiplier:           2,
		MaxDelay:             6 * time.Hour,
		RetryAfterCap:        time.Hour,
		ConnectTimeout:       5 * time.Second,
		HeaderTimeout:        10 * time.Second,
		AttemptTimeout:       15 * time.Second,
		BreakerFailures:      20,
		BreakerProbeInterval: 5 * time.Minute,
		DisableAfter:         72 * time.Hour,
		DeadLetterRetention:  720 * time.Hour,
		IdempotencyRetention: 24 * time.Hour,
		MaxRequestBytes:      12 << 20,
		MaxResponseBytes:     12 << 20,
		MaxBacklogItems:      100000,
		MaxBacklogBytes:      1 << 30,
	}
}
