package redisstore

import (
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// State is a callout's state (SPEC §4 "States").
type State string

// The callout states of SPEC §4.
const (
	// Scheduled: waiting in the due set for its next attempt.
	Scheduled State = "scheduled"
	// InFlight: leased by one worker (or the synchronous ingress) that is
	// making an attempt.
	InFlight State = "in_flight"
	// Held: waiting because the breaker is open or the endpoint paused; no
	// attempt is consumed while held.
	Held State = "held"
	// Succeeded: ended with a 2xx.
	Succeeded State = "succeeded"
	// Failed: ended synchronously with a permanent answer returned to the
	// caller; recorded for idempotent replay, not dead-lettered.
	Failed State = "failed"
	// DeadLettered: ended asynchronously without success.
	DeadLettered State = "dead_lettered"
)

// Finished reports whether the state is final.
func (s State) Finished() bool { return s == Succeeded || s == Failed || s == DeadLettered }

// Kind says why an attempt was made (SPEC §4 status document `kind`).
type Kind string

// The attempt kinds of SPEC §4.
const (
	KindFirst  Kind = "first"  // the callout's first attempt
	KindRetry  Kind = "retry"  // any later attempt
	KindProbe  Kind = "probe"  // the half-open breaker's single probe (SPEC §6)
	KindReplay Kind = "replay" // first attempt of a replay chain (SPEC §8)
)

// DeadLetterReason says why a callout became a dead letter (SPEC §4, §7).
type DeadLetterReason string

// The dead-letter reasons.
const (
	ReasonExhausted        DeadLetterReason = "exhausted"         // attempts or max_age used up (SPEC §3)
	ReasonPermanent        DeadLetterReason = "permanent"         // an asynchronous attempt got a permanent answer
	ReasonAmbiguous        DeadLetterReason = "ambiguous"         // no answer to a write to an `idempotency: ignored` upstream (SPEC §3)
	ReasonEndpointDisabled DeadLetterReason = "endpoint_disabled" // its endpoint was disabled (SPEC §6)
)

// Breaker is an endpoint's circuit-breaker settings (SPEC §6; per endpoint in
// config.Endpoint, defaults in policy.Policy).
type Breaker struct {
	// Failures is the number of consecutive counting failures that opens the
	// breaker (breaker_failures, default 20). Zero or less: 20.
	Failures int
	// ProbeInterval is how long the breaker stays open before one probe is
	// let through, and again after a failed probe (breaker_probe_interval,
	// default 5m). Zero or less: 5m.
	ProbeInterval time.Duration
	// ProbeLease is how long the probe token is held before another probe
	// may be taken, so a dead prober cannot wedge the breaker. Zero or less:
	// the attempt's lease.
	ProbeLease time.Duration
}

func (b Breaker) withDefaults(lease time.Duration) Breaker {
	if b.Failures <= 0 {
		b.Failures = 20
	}
	if b.ProbeInterval <= 0 {
		b.ProbeInterval = 5 * time.Minute
	}
	if b.ProbeLease <= 0 {
		b.ProbeLease = lease
	}
	return b
}

// Limits is an endpoint's backlog cap (DESIGN "Fairness"): pending items
// (due + leased callouts) and the bytes of their request bodies. A create
// that would go over either is refused with ErrBacklogFull. Zero: no cap.
type Limits struct {
	MaxItems int64
	MaxBytes int64
}

// GateState says whether an endpoint currently admits attempts.
type GateState string

// The gate states, from the endpoint hash (SPEC §3 pause, §6 breaker and
// disable).
const (
	// GateOpen: attempts may be made.
	GateOpen GateState = "open"
	// GateHalfOpen: the breaker's probe interval has passed; the first
	// claimer takes the single probe token and makes one attempt.
	GateHalfOpen GateState = "half_open"
	// GateProbing: half-open, and another worker holds the probe token
	// until Gate.Until.
	GateProbing GateState = "probing"
	// GateBreakerOpen: the breaker is open until Gate.Until (the probe time).
	GateBreakerOpen GateState = "breaker_open"
	// GatePaused: a 429 with Retry-After paused the endpoint until Gate.Until.
	GatePaused GateState = "paused"
	// GateDisabled: the endpoint is disabled until an admin enables it.
	GateDisabled GateState = "disabled"
)

// Gate is an endpoint's gate as a script saw it.
type Gate struct {
	State GateState
	// Until is when the gate may open again (probe time, pause end, probe
	// token expiry); zero for GateOpen, GateHalfOpen and GateDisabled.
	Until time.Time
}

// Shut reports whether the gate refuses attempts (paused, breaker open, a
// probe out, or disabled).
func (g Gate) Shut() bool { return g.State != GateOpen && g.State != GateHalfOpen && g.State != "" }

// Attempt is one entry of a callout's attempt log (SPEC §4 `attempts`).
// It is stored as compact JSON with the field names of the status document.
type Attempt struct {
	// N is the attempt's number, 1-based (filled from the claim on Complete).
	N int
	// Kind is why it was made (filled from the claim on Complete).
	Kind Kind
	// StartedAt is when the request was sent (ms precision).
	StartedAt time.Time
	// Duration is how long it took (ms precision).
	Duration time.Duration
	// Status is the upstream's HTTP status, 0 when there was no response.
	Status int
	// Outcome is the attempt's class (SPEC §2).
	Outcome policy.Outcome
	// Error is a short error text without secrets ("" when none), e.g. the
	// policy.Classification reason or "lease_expired" for a reaped attempt.
	Error string
}

// Response is an upstream response kept on a callout: the last one
// received. Its body is capped at Options.ResponseBodyCap bytes.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header is the upstream's response header, as received.
	Header http.Header
	// Body is the body, at most Options.ResponseBodyCap bytes.
	Body []byte
	// Truncated is true when Body was cut to the cap; an idempotent replay
	// of a truncated body is not faithful.
	Truncated bool
}

// Callout is a callout record as stored (SPEC §4 status document; the
// ingress redacts secrets before anything leaves the proxy).
type Callout struct {
	ID       string
	Endpoint string
	// Issuer is the caller's JWT issuer (the org, SPEC §5 scope).
	Issuer string
	Method string
	Path   string
	// Query is the raw query string, without "?".
	Query string
	// Header is the caller's request header as received, minus
	// Authorization, Cookie, Proxy-Authorization and hop-by-hop headers.
	Header http.Header
	// Body is the caller's request body, whole.
	Body           []byte
	IdempotencyKey string
	// Fingerprint is Fingerprint(Method, Path, Query, Body).
	Fingerprint  string
	SourceRecord string
	State        State
	// Attempts counts real dispatches (claims), inline ones included.
	Attempts       int
	CreatedAt      time.Time
	FirstAttemptAt time.Time // zero before the first attempt
	NextAttemptAt  time.Time // zero unless scheduled or held
	LeaseExpiresAt time.Time // zero unless in_flight
	FinishedAt     time.Time // zero unless finished
	// ReplayOf is the dead letter this replay chain replays (SPEC §8).
	ReplayOf         string
	AttemptLog       []Attempt
	Response         *Response // last upstream response, nil when none
	LastError        string
	DeadLetterReason DeadLetterReason
}
