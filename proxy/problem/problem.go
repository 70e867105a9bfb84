// Package problem is the proxy's one error type and its one mapping to HTTP:
// every proxy-made error leaves as application/problem+json (RFC 9457) with
// the outcome class of contract §2, so nobody confuses the proxy's own 503
// with an upstream's. The domain's errors (policy.Err*) become problems by
// one table (domain.go), which both listeners use through From and
// FromStore; a shut gate through FromGate.
package problem

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// Code names a problem type. It is the last segment of the problem's `type`
// URI (TypeBase + Code) and is stable: callers and the Apex client match on it.
type Code string

// TypeBase prefixes every problem `type` URI.
const TypeBase = "urn:callout-proxy:problem:"

// The problem codes. Each maps to one HTTP status in Status.
const (
	Unauthorized          Code = "unauthorized"            // 401: missing or bad bearer token
	Forbidden             Code = "forbidden"               // 403: caller not allowed on the endpoint / scope
	UnknownEndpoint       Code = "unknown-endpoint"        // 404: not in the allow-list
	NotFound              Code = "not-found"               // 404: no such callout or route
	NotAdminListener      Code = "not-admin-listener"      // 404: an admin path asked of the callout listener
	EndpointDisabled      Code = "endpoint-disabled"       // 503: auto- or admin-disabled endpoint
	InvalidRequest        Code = "invalid-request"         // 400: malformed request
	PathEscape            Code = "path-escape"             // 400: caller path could leave the endpoint's base path
	AbsoluteForm          Code = "absolute-form"           // 400: absolute-form request target
	MethodNotAllowed      Code = "method-not-allowed"      // 405: TRACE, CONNECT
	BodyTooLarge          Code = "body-too-large"          // 413: request over max_request_bytes
	IdempotencyKeyMissing Code = "idempotency-key-missing" // 400: POST/PATCH without a key
	IdempotencyKeyInvalid Code = "idempotency-key-invalid" // 400: key syntax
	IdempotencyMismatch   Code = "idempotency-key-reused"  // 422: same key, other request
	InFlight              Code = "in-flight"               // 409: same key, its synchronous first attempt still running (Retry-After: 1)
	DeadLettered          Code = "dead-lettered"           // 409: the callout is a dead letter (a synchronous wait that ended one, a repeat of its key)
	BlockedAddress        Code = "blocked-address"         // 403: SSRF guard refused the address
	BreakerOpen           Code = "breaker-open"            // 503: reads while the breaker is open
	EndpointPaused        Code = "endpoint-paused"         // 503: reads while a 429 Retry-After pause lasts
	BacklogFull           Code = "backlog-full"            // 503: endpoint backlog cap reached
	StoreUnavailable      Code = "store-unavailable"       // 503: Redis unreachable
	ResponseTooLarge      Code = "response-too-large"      // 502: upstream body over max_response_bytes
	UpstreamUnavailable   Code = "upstream-unavailable"    // 502: no upstream response (read, not scheduled)
	UpstreamTimeout       Code = "upstream-timeout"        // 504: a per-attempt limit ran out (read, not scheduled)
	Internal              Code = "internal"                // 500
	Overloaded            Code = "overloaded"              // 503: memory budget (max_inflight_bytes) exhausted
	HeadersTooLarge       Code = "headers-too-large"       // 431: over max_header_bytes or max_header_fields
	RequestTimeout        Code = "request-timeout"         // 408: body not received within body_read_timeout
	LoginThrottled        Code = "login-throttled"         // 429: too many failed admin-token checks from a source or token prefix
	ReloadRejected        Code = "reload-rejected"         // 422: a reload's configuration was not put in force
)

var statuses = map[Code]int{
	Unauthorized: 401, Forbidden: 403, UnknownEndpoint: 404, NotFound: 404, NotAdminListener: 404,
	EndpointDisabled: 503, InvalidRequest: 400, PathEscape: 400, AbsoluteForm: 400,
	MethodNotAllowed: 405, BodyTooLarge: 413, IdempotencyKeyMissing: 400,
	IdempotencyKeyInvalid: 400, IdempotencyMismatch: 422, InFlight: 409,
	DeadLettered: 409, BlockedAddress: 403, BreakerOpen: 503, EndpointPaused: 503, BacklogFull: 503,
	StoreUnavailable: 503, ResponseTooLarge: 502, UpstreamUnavailable: 502, UpstreamTimeout: 504,
	Internal: 500, Overloaded: 503, HeadersTooLarge: 431, RequestTimeout: 408, LoginThrottled: 429,
	ReloadRejected: 422,
}

// Codes are every problem code the proxy can send, sorted: the ones
// Status knows (docs/openapi/problem.yaml lists each, which
// TestOpenAPIProblemTypes checks).
func Codes() []Code {
	return slices.Sorted(maps.Keys(statuses))
}

// Status returns the HTTP status for a code; 500 for an unknown one.
func (c Code) Status() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is the proxy's error: a code, a human detail that never contains
// secrets or bodies, and an optional wrapped cause (logged, never sent).
type Error struct {
	Code   Code
	Detail string
	// Outcome overrides the default outcome class (Rejected); a response over
	// max_response_bytes is Permanent, for instance.
	Outcome policy.Outcome
	// RetryAfter, when > 0, is sent as Retry-After in seconds.
	RetryAfter int
	// CalloutID, when set, is sent as Callout-Id and in the body.
	CalloutID string
	// State, DeadLetterReason and LastOutcome describe the callout a
	// problem is about once it finished (contract §12): State is sent as
	// Callout-State, DeadLetterReason as Callout-Dead-Letter-Reason, all
	// three in the body. Empty: not sent.
	State            policy.State
	DeadLetterReason policy.DeadLetterReason
	LastOutcome      policy.Outcome
	Err              error
}

// Errorf returns an *Error with the code and a detail.
func Errorf(code Code, detail string) *Error { return &Error{Code: code, Detail: detail} }

// Wrap returns an *Error with the code and detail, wrapping cause.
func Wrap(code Code, detail string, cause error) *Error {
	return &Error{Code: code, Detail: detail, Err: cause}
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return string(e.Code) + ": " + e.Detail + ": " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Detail
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Body is the RFC 9457 problem document the proxy sends: the wire type
// api.Problem, under the name this package's callers know.
type Body = api.Problem

// From turns any error into an *Error: the *Error in err's chain as it
// is; a domain error (policy.Err*, replay.Err*) by the one table of
// domain.go; anything else Internal, with its text kept out of the detail.
func From(err error) *Error {
	if pe, ok := lookup(err); ok {
		return pe
	}
	return &Error{Code: Internal, Detail: "internal error", Err: err}
}

// Write sends err as application/problem+json with Callout-Outcome,
// Callout-Problem (the code), and Callout-Id and Retry-After when known. It
// is the one place where a proxy error becomes an HTTP response; it never
// looks at the caller's Accept. Callout-Problem tells the proxy's own
// problem from an upstream body that looks like one: the forwarder drops
// every Callout-* field of upstream responses (contract §10), so only a
// problem the proxy made carries it.
func Write(w http.ResponseWriter, err error) {
	pe := From(err)
	out := pe.Outcome
	if out == "" {
		out = policy.Rejected
	}
	status := pe.Code.Status()
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Callout-Outcome", string(out))
	h.Set("Callout-Problem", string(pe.Code))
	if pe.CalloutID != "" {
		h.Set("Callout-Id", pe.CalloutID)
	}
	if pe.State != "" {
		h.Set("Callout-State", string(pe.State))
	}
	if pe.DeadLetterReason != "" {
		h.Set("Callout-Dead-Letter-Reason", string(pe.DeadLetterReason))
	}
	if pe.Code == Unauthorized {
		// RFC 6750 §3: a 401 names the scheme it wants.
		h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	if pe.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(pe.RetryAfter))
	}
	b, _ := json.Marshal(Body{
		Type: TypeBase + string(pe.Code), Title: http.StatusText(status), Status: status,
		Detail: pe.Detail, Outcome: out, CalloutID: pe.CalloutID,
		State: pe.State, DeadLetterReason: pe.DeadLetterReason, LastOutcome: pe.LastOutcome,
	})
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
