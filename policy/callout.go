package policy

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
)

// Claimed is one attempt leased to a worker (or, from Begin, to the
// synchronous ingress): everything needed to dispatch it and to Complete
// it. Only the holder of LeaseToken can complete it.
type Claimed struct {
	ID string
	// NewCallout is the callout's request as recorded (Callout.Request).
	NewCallout
	// Attempt is this attempt's number: the count of real dispatches,
	// this one included (contract §3 "every real dispatch counts").
	Attempt int
	// Kind is why this attempt is made: first, retry, probe or replay.
	Kind Kind
	// LeaseToken fences Complete: a reaped lease's token is void.
	LeaseToken string
	// LeaseExpiresAt is when the reaper may take the callout back.
	LeaseExpiresAt time.Time
	// StartedAt is when the lease was taken (ms precision).
	StartedAt time.Time
	// DueAt is when the attempt was due (its due-set score; for Begin, the
	// creation time): StartedAt − DueAt is the scheduling lag.
	DueAt time.Time
	// FirstAttemptAt starts the max_age window (contract §3).
	FirstAttemptAt time.Time
	CreatedAt      time.Time
}

// Fingerprint returns the request fingerprint of contract §5: base64url (no
// padding) of SHA-256 over the method, path, query and body bytes, each
// length-prefixed so no two requests share one. Content-Type is ignored.
func Fingerprint(method, path, query string, body []byte) string {
	sum := FingerprintSum(method, path, query, body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// FingerprintSum is Fingerprint's SHA-256 before its base64url encoding
// (the store keeps its first 12 bytes in a reservation).
func FingerprintSum(method, path, query string, body []byte) [sha256.Size]byte {
	h := sha256.New()
	var n [20]byte
	for _, part := range [][]byte{[]byte(method), []byte(path), []byte(query), body} {
		_, _ = h.Write(append(strconv.AppendInt(n[:0], int64(len(part)), 10), ':'))
		_, _ = h.Write(part)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// State is a callout's state (contract §4 "States").
type State string

// Kind says why an attempt was made (contract §4 status document `kind`).
type Kind string

// DeadLetterReason says why a callout became a dead letter (contract §4, §7).
type DeadLetterReason string

// Attempt is one entry of a callout's attempt log (contract §4 `attempts`).
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
	// Outcome is the attempt's class (contract §2).
	Outcome Outcome
	// Error is a short error text without secrets ("" when none), e.g. the
	// Classification reason or "lease_expired" for a reaped attempt.
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

// Callout is a callout record as stored (contract §4 status document; the
// ingress redacts secrets before anything leaves the proxy).
type Callout struct {
	ID       string
	Endpoint string
	// Issuer is the caller's JWT issuer (the org, contract §5 scope).
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
	// ReplayOf is the dead letter this replay chain replays (contract §8).
	ReplayOf string
	// TraceContext is the trace context it was accepted under
	// (NewCallout.TraceContext); a replay of it joins that trace.
	TraceContext     string
	AttemptLog       []Attempt
	Response         *Response // last upstream response, nil when none
	LastError        string
	DeadLetterReason DeadLetterReason
}

// The callout states of contract §4.
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

// The attempt kinds of contract §4.
const (
	KindFirst  Kind = "first"  // the callout's first attempt
	KindRetry  Kind = "retry"  // any later attempt
	KindProbe  Kind = "probe"  // the half-open breaker's single probe (contract §6)
	KindReplay Kind = "replay" // first attempt of a replay chain (contract §8)
)

// The dead-letter reasons.
const (
	DeadLetterExhausted        DeadLetterReason = "exhausted"         // attempts or max_age used up (contract §3)
	DeadLetterPermanent        DeadLetterReason = "permanent"         // an asynchronous attempt got a permanent answer
	DeadLetterAmbiguous        DeadLetterReason = "ambiguous"         // no answer to a write to an `idempotency: ignored` upstream (contract §3)
	DeadLetterEndpointDisabled DeadLetterReason = "endpoint_disabled" // its endpoint was disabled (contract §6)
)

// DeadLetterReasons are the reasons above, in that order: the values of
// Failed_Callout__c.Reason__c too (salesforce's metadata test checks them
// against the picklist).
var DeadLetterReasons = []DeadLetterReason{DeadLetterExhausted, DeadLetterPermanent, DeadLetterAmbiguous,
	DeadLetterEndpointDisabled}

// Request returns the callout's request as recorded: NewCallout's fields
// of c (a replay enqueues it again with its own ReplayOf, contract §8).
func (c *Callout) Request() NewCallout {
	return NewCallout{Endpoint: c.Endpoint, Issuer: c.Issuer, Method: c.Method, Path: c.Path, Query: c.Query,
		Header: c.Header, Body: c.Body, IdempotencyKey: c.IdempotencyKey, SourceRecord: c.SourceRecord,
		ReplayOf: c.ReplayOf, TraceContext: c.TraceContext}
}

// Finished reports whether the state is final.
func (s State) Finished() bool {
	return s == Succeeded || s == Failed || s == DeadLettered
}
