package policy

import (
	"net/http"
	"time"
)

// NewCallout is a request to record: what Begin and Enqueue store.
type NewCallout struct {
	// Endpoint is the endpoint name (^[a-z0-9][a-z0-9-]{0,62}$, contract §10).
	Endpoint string
	// Issuer is the caller's JWT issuer: with Endpoint and IdempotencyKey
	// the scope of the reservation (contract §5).
	Issuer string
	Method string
	// Path is the path below the endpoint's base URL, with a leading "/".
	Path string
	// Query is the raw query string without "?".
	Query string
	// Header is the caller's header as received, already without
	// Authorization, Cookie, Proxy-Authorization and hop-by-hop headers.
	Header http.Header
	// Body is the request body; it counts toward Limits.MaxBytes.
	Body []byte
	// IdempotencyKey, when set, is reserved atomically with the creation.
	IdempotencyKey string
	// SourceRecord is the Callout-Source-Record header (a Salesforce id).
	SourceRecord string
	// ReplayOf (Enqueue only) is the dead letter this new chain replays
	// (contract §8); the chain takes over that dead letter's reservation.
	ReplayOf string
	// TraceContext is the W3C trace context of the span that accepted the
	// callout (proxy/tracing Encode: traceparent, then "," and tracestate
	// when there is one; at most 312 bytes), so its dispatched attempts and
	// replays join that trace; "" when tracing is off.
	TraceContext string
}

// Existing is the callout already holding an idempotency reservation.
type Existing struct {
	// ID is the holder's callout id.
	ID string
	// SameRequest reports whether the holder's fingerprint equals the new
	// request's (contract §5: else 422).
	SameRequest bool
	// Callout is the holder's record as read just after the reservation
	// check (a second round trip, only on this path).
	Callout *Callout
	// LeaseExpired is true when the holder is in_flight but its lease has
	// expired (its worker is presumably gone; the reaper will requeue it).
	LeaseExpired bool
}

// BeginOptions are the per-endpoint settings Begin needs.
type BeginOptions struct {
	// Lease is how long the first attempt is leased to the caller: at least
	// the attempt limit plus a grace period (contract §3). Required (> 0).
	Lease time.Duration
	// Breaker supplies ProbeLease for a request that becomes the probe.
	Breaker BreakerSettings
	// Limits is the endpoint's backlog cap.
	Limits BacklogLimits
}

// BeginResult is what Begin did; exactly one of its fields is set.
type BeginResult struct {
	// Claimed: the callout was created in_flight and its first attempt
	// (Kind first, or probe when the breaker was half-open and this request
	// took the probe token) is leased to the caller, who must Complete it.
	Claimed *Claimed
	// Held: the callout was created held (breaker open, probe out or
	// endpoint paused); no attempt is consumed (contract §4 "breaker open").
	Held *HeldCallout
	// Existing: the idempotency key is already reserved; nothing created.
	Existing *Existing
}

// HeldCallout is a callout created in state held.
type HeldCallout struct {
	ID string
	// Gate is why it is held and until when.
	Gate Gate
	// DueAt is when it becomes due (the gate's reopening time).
	DueAt time.Time
}

// EnqueueOptions are the settings Enqueue needs.
type EnqueueOptions struct {
	// DueAt is when the first attempt is due; zero: now (respond-async).
	DueAt time.Time
	// Limits is the endpoint's backlog cap.
	Limits BacklogLimits
	// DryRun asks what Enqueue would do, changing nothing: the same
	// reservation, gate and cap checks answer (a replay job's dry run,
	// contract §8), and the result has no ID.
	DryRun bool
}

// EnqueueResult is what Enqueue did (or, with EnqueueOptions.DryRun, would do).
type EnqueueResult struct {
	// ID is the new callout's id ("" when Existing is set, and in a dry run).
	ID string
	// State is Scheduled, or Held when the gate is shut.
	State State
	// Gate is the gate the script saw.
	Gate Gate
	// DueAt is when the callout becomes due; a held callout is due when
	// its gate reopens, at the earliest.
	DueAt time.Time
	// Existing: the idempotency key is already reserved; nothing created.
	Existing *Existing
}

// Admission is the gate decision for a request that has no callout record
// (a read, contract §4).
type Admission struct {
	// Gate is GateOpen (forward it), GateHalfOpen (forward it: it is the
	// probe, ProbeToken is set) or a shut gate (refuse: 503, Retry-After
	// from Gate.Until; GateDisabled: endpoint-disabled).
	Gate Gate
	// ProbeToken is set when this request took the probe token; pass it to
	// RecordResult.
	ProbeToken string
	// ConsecutiveFailures is the endpoint's count: when it is 0 a success
	// needs no RecordResult (ARCHITECTURE.md: a success costs no write then).
	ConsecutiveFailures int
}

// ReadResult is the result of a request without a callout record, for the
// breaker.
type ReadResult struct {
	// ProbeToken is Admission.ProbeToken ("" when the request was no probe).
	ProbeToken string
	// Success: the upstream answered 2xx.
	Success bool
	// CountsTowardBreaker: a retryable failure that counts (contract §6).
	CountsTowardBreaker bool
	// PausedUntil, when set, pauses the endpoint (429 Retry-After, contract §3).
	PausedUntil time.Time
	// Breaker is the endpoint's breaker settings (threshold, interval).
	Breaker BreakerSettings
}

// BacklogLimits are an endpoint's backlog caps (docs/limits.md, contract
// §10): pending items (scheduled, held and in-flight callouts) and the bytes
// Redis holds for its pending callouts and dead letters (method, path,
// headers, body, attempt log, last response and a fixed per-record
// overhead), in all and per caller organisation (JWT issuer). A create that
// would go over one is refused before anything is stored: ErrBacklogFull,
// or ErrIssuerBacklogFull for an issuer's share. Zero: no cap.
type BacklogLimits struct {
	// MaxItems caps pending callouts (max_backlog_items).
	MaxItems int64
	// MaxBytes caps stored bytes of pending callouts and dead letters
	// (max_backlog_bytes).
	MaxBytes int64
	// MaxItemsPerIssuer caps one issuer's pending callouts
	// (max_backlog_items_per_issuer).
	MaxItemsPerIssuer int64
	// MaxBytesPerIssuer caps one issuer's stored bytes
	// (max_backlog_bytes_per_issuer).
	MaxBytesPerIssuer int64
}
