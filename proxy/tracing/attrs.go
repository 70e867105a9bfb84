package tracing

import "go.opentelemetry.io/otel/attribute"

// Span names (low cardinality: OpenTelemetry's span naming guidance).
const (
	// SpanAdmission is a callout's admission on the callout listener:
	// auth, the allow-list, the key and body checks, and the store's
	// idempotency reservation and gate (Begin, Enqueue, Admit).
	SpanAdmission = "callout.admission"
	// SpanAttempt is one attempt to the upstream: synchronous, inline,
	// dispatched (retry, probe, replay), with its decision and completion.
	SpanAttempt = "callout.attempt"
	// SpanReplay is the creation of a replay chain for a dead letter.
	SpanReplay = "callout.replay"
	// SpanWriteBatch is one round of Salesforce writes from the outbox.
	SpanWriteBatch = "salesforce.write_batch"
)

// Attribute keys. The http.* and server.* keys are OpenTelemetry's
// semantic conventions (HTTP spans, v1.26+); the callout.* and salesforce.*
// keys are the proxy's own. No key carries a header value, a query, a body,
// a caller's path or an error's free text (docs/tracing.md "What is never
// recorded").
const (
	// KeyMethod is the request method; methods outside RFC 9110's and
	// RFC 5789's set are "_OTHER", as the conventions ask.
	KeyMethod = attribute.Key("http.request.method")
	// KeyRoute is the route template of the callout listener.
	KeyRoute = attribute.Key("http.route")
	// KeyStatus is the HTTP status: the upstream's on an attempt, the
	// answer the caller got on the server span (every answer).
	KeyStatus = attribute.Key("http.response.status_code")
	// KeyServerAddress is the upstream's host, from the configuration.
	KeyServerAddress = attribute.Key("server.address")
	// KeyServerPort is the upstream's port, from the configuration (the
	// scheme's default when the URL names none).
	KeyServerPort = attribute.Key("server.port")

	KeyEndpoint = attribute.Key("callout.endpoint")  // endpoint name
	KeyCallout  = attribute.Key("callout.id")        // callout id
	KeyIssuer   = attribute.Key("callout.issuer")    // caller's JWT issuer (the org)
	KeyKeyed    = attribute.Key("callout.keyed")     // the request had an Idempotency-Key (never its value)
	KeyAdmitted = attribute.Key("callout.admission") // AdmissionResult
	KeyGate     = attribute.Key("callout.gate")      // gate state when it held or refused the callout
	KeyProblem  = attribute.Key("callout.problem")   // problem code of a refusal

	KeyAttempt    = attribute.Key("callout.attempt")             // attempt number, 1-based
	KeyKind       = attribute.Key("callout.attempt.kind")        // first, retry, probe, replay
	KeyMode       = attribute.Key("callout.attempt.mode")        // synchronous, inline, dispatched
	KeyOutcome    = attribute.Key("callout.outcome")             // success, retryable, permanent, rejected
	KeyReason     = attribute.Key("callout.reason")              // classification reason word
	KeyAction     = attribute.Key("callout.action")              // policy.Action decided
	KeyState      = attribute.Key("callout.state")               // state after the completion
	KeyDeadLetter = attribute.Key("callout.dead_letter_reason")  // reason when it became a dead letter
	KeyRetryAfter = attribute.Key("callout.retry_after_ms")      // Retry-After used, capped, ms
	KeyNextIn     = attribute.Key("callout.next_attempt_in_ms")  // delay before the next attempt, ms
	KeyReplayOf   = attribute.Key("callout.replay_of")           // dead letter a replay chain replays
	KeyReplayed   = attribute.Key("callout.replay.result")       // ReplayResult
	KeyEntries    = attribute.Key("salesforce.outbox_entries")   // outbox entries claimed
	KeyRecords    = attribute.Key("salesforce.records")          // Failed_Callout__c writes
	KeyEvents     = attribute.Key("salesforce.events")           // Callout_Result__e events
	KeyNotes      = attribute.Key("salesforce.notifications")    // owner notifications
	KeyCalls      = attribute.Key("salesforce.api_calls")        // API calls made
	KeyDone       = attribute.Key("salesforce.entries_done")     // entries written
	KeyRetried    = attribute.Key("salesforce.entries_retried")  // entries to try again
	KeyDeferred   = attribute.Key("salesforce.entries_deferred") // entries not tried this round
	KeyOverflow   = attribute.Key("salesforce.entries_overflow") // entries left for the next batch
	KeyWriteError = attribute.Key("salesforce.error_code")       // code (or class) of the call that stopped the round
	KeyPrefer     = attribute.Key("callout.prefer")              // respond-async or wait=N asked for
)

// Keys lists every attribute key the proxy records, for the tests that
// check nothing else is and for docs/tracing.md.
var Keys = []attribute.Key{
	KeyMethod, KeyRoute, KeyStatus, KeyServerAddress, KeyServerPort, KeyEndpoint, KeyCallout, KeyIssuer, KeyKeyed,
	KeyAdmitted, KeyGate, KeyProblem, KeyAttempt, KeyKind, KeyMode, KeyOutcome, KeyReason, KeyAction,
	KeyState, KeyDeadLetter, KeyRetryAfter, KeyNextIn, KeyReplayOf, KeyReplayed, KeyEntries, KeyRecords,
	KeyEvents, KeyNotes, KeyCalls, KeyDone, KeyRetried, KeyDeferred, KeyOverflow, KeyWriteError, KeyPrefer,
}

// knownMethods are the methods recorded as they are (RFC 9110 §9, RFC 5789).
var knownMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true, "CONNECT": true,
	"OPTIONS": true, "TRACE": true, "PATCH": true,
}

// method is the http.request.method value of m.
func method(m string) attribute.KeyValue {
	if knownMethods[m] {
		return KeyMethod.String(m)
	}
	return KeyMethod.String("_OTHER")
}
