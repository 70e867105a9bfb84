package policy

import "errors"

// Outcome is one of the four published outcome classes (contract §2). Every
// response the proxy sends carries one in its Callout-Outcome header.
type Outcome string

// The outcome classes of contract §2.
const (
	// Success: the upstream answered 2xx.
	Success Outcome = "success"
	// Retryable: 5xx except 501 and 505, 408, 429, or no response at all
	// (DNS, connect, TLS, reset, timeout); also every 202 the proxy sends.
	Retryable Outcome = "retryable"
	// Permanent: any other upstream status, or a response over
	// max_response_bytes. Never retried.
	Permanent Outcome = "permanent"
	// Rejected: the proxy refused before dispatch. Never retried by the proxy.
	Rejected Outcome = "rejected"
)

// Classification is what Classify decides about one attempt.
type Classification struct {
	// Outcome is the published class.
	Outcome Outcome
	// Reason is a short, stable, machine-readable word for why, used in
	// attempt records, logs and metrics: "status_2xx", "status_5xx",
	// "status_408", "status_429", "status_4xx", "status_3xx", "status_1xx",
	// "status_501", "status_505", "status_invalid", "dns", "connect_refused",
	// "unreachable", "connect_timeout", "reset", "tls", "header_timeout",
	// "attempt_timeout", "eof", "network", "response_too_large", "canceled",
	// "credentials", "overloaded".
	// The Reason* constants (reasons.go) spell each one.
	Reason string
}

// ErrResponseTooLarge marks an upstream response whose body exceeded
// max_response_bytes. Classify maps it to Permanent (contract §2).
var ErrResponseTooLarge = errors.New("upstream response larger than max_response_bytes")

// ErrOverloaded marks an attempt whose upstream answered but whose answer
// the proxy could not buffer: its own memory budget (max_inflight_bytes, or
// the organisation's share of it) had no room. Classify maps it to
// Retryable "overloaded", which never counts toward the breaker: the limit
// was the proxy's, not the upstream's failure (contract §6, §10).
var ErrOverloaded = errors.New("the proxy's own memory limit")

// ErrCredentials marks an attempt that could not be made because the
// endpoint's upstream credentials could not be obtained, e.g. its OAuth 2.0
// token endpoint was unreachable or refused the client. Classify maps it to
// Retryable "credentials": no request reached the upstream, and a later
// attempt may get a token.
var ErrCredentials = errors.New("upstream credentials unavailable")

// TimeoutError marks one of the per-attempt limits of contract §3 running out.
// The forwarder wraps the transport's error in it so the reason is exact.
type TimeoutError struct {
	// Limit is "connect", "header" or "attempt"; Classify turns it into the
	// reason "<limit>_timeout" (any other value gives "attempt_timeout").
	Limit string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *TimeoutError) Error() string {
	if e.Err == nil {
		return e.Limit + " timeout"
	}
	return e.Limit + " timeout: " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *TimeoutError) Unwrap() error { return e.Err }

// Timeout reports true, like net.Error.
func (e *TimeoutError) Timeout() bool { return true }
