package api

import (
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// StatusDocument is the JSON of GET /v1/callouts/{id} and of every 202
// (contract §4), and the first fields of the admin API's CalloutDoc. Secrets
// are redacted (contract §7): Path's query, LastError and each attempt's
// Error, Response's headers and JSON body.
type StatusDocument struct {
	ID             string `json:"id"`
	Endpoint       string `json:"endpoint"`
	Method         string `json:"method"`
	Path           string `json:"path"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	SourceRecord   string `json:"source_record,omitempty"`
	// State is scheduled, in_flight, held, succeeded, failed or
	// dead_lettered (contract §4 "States").
	State policy.State `json:"state"`
	// Outcome is the class of the callout's latest result (contract §12):
	// retryable while it is pending, once finished its last attempt's
	// class (a dead letter after 503s is retryable: its reason, not its
	// class, says why it ended), rejected when it never had an attempt.
	Outcome policy.Outcome `json:"outcome"`
	// LastOutcome is the class of the last attempt; absent before the
	// first.
	LastOutcome policy.Outcome `json:"last_outcome,omitempty"`
	Attempts    []AttemptDoc   `json:"attempts"`
	// NextAttemptAt is when the next attempt is due; absent once finished.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// ReplayOf is the dead letter this chain replays (contract §8).
	ReplayOf string `json:"replay_of,omitempty"`
	// WebhookID, on an endpoint with standard_webhooks, is the webhook-id
	// every attempt of this callout carries ("msg_" + ID); a replay, a new
	// callout, has its own, and ReplayOfWebhookID is the replayed one's.
	WebhookID         string `json:"webhook_id,omitempty"`
	ReplayOfWebhookID string `json:"replay_of_webhook_id,omitempty"`
	// DeadLetterReason is exhausted, permanent, ambiguous or
	// endpoint_disabled.
	DeadLetterReason string `json:"dead_letter_reason,omitempty"`
	LastError        string `json:"last_error,omitempty"`
	// Response is the final upstream response of a finished callout.
	Response *ResponseDoc `json:"response,omitempty"`
	// HeldBy says, for a held callout, which gate holds it (contract §6,
	// §12 `held_by`); absent otherwise, and when the gate could not be read.
	HeldBy *HeldByDoc `json:"held_by,omitempty"`
}

// AttemptDoc is one attempt of a status document. Kind is first, retry,
// probe or replay; Status the upstream's status, absent (0) when it did
// not answer; DurationMs the attempt's length in whole milliseconds.
type AttemptDoc struct {
	N          int            `json:"n"`
	Kind       string         `json:"kind"`
	StartedAt  time.Time      `json:"started_at"`
	DurationMs int64          `json:"duration_ms"`
	Status     int            `json:"status,omitempty"`
	Outcome    policy.Outcome `json:"outcome"`
	Error      string         `json:"error,omitempty"`
}

// ResponseDoc is the final upstream response of a finished callout. Body is
// text when it is valid UTF-8, else base64 with BodyEncoding "base64";
// BodyTruncated when the proxy kept only its first bytes.
type ResponseDoc struct {
	Status        int         `json:"status"`
	Headers       http.Header `json:"headers"`
	Body          string      `json:"body"`
	BodyEncoding  string      `json:"body_encoding,omitempty"`
	BodyTruncated bool        `json:"body_truncated,omitempty"`
}

// PolicyDocument is GET /v1/policy: the policy in force and its backoff
// envelope (contract §3). Durations are Go duration strings; byte limits are
// bytes.
type PolicyDocument struct {
	MaxAttempts          int             `json:"max_attempts"`
	MaxAge               string          `json:"max_age"`
	BaseDelay            string          `json:"base_delay"`
	Multiplier           float64         `json:"multiplier"`
	MaxDelay             string          `json:"max_delay"`
	RetryAfterCap        string          `json:"retry_after_cap"`
	ConnectTimeout       string          `json:"connect_timeout"`
	HeaderTimeout        string          `json:"header_timeout"`
	AttemptTimeout       string          `json:"attempt_timeout"`
	BreakerFailures      int             `json:"breaker_failures"`
	BreakerProbeInterval string          `json:"breaker_probe_interval"`
	DisableAfter         string          `json:"disable_after"`
	IdempotencyRetention string          `json:"idempotency_retention"`
	DeadLetterRetention  string          `json:"dead_letter_retention"`
	MaxRequestBytes      int64           `json:"max_request_bytes"`
	MaxResponseBytes     int64           `json:"max_response_bytes"`
	Envelope             policy.Envelope `json:"envelope"`
}

// HeldByDoc is the gate that holds a held callout (contract §12 `held_by`).
type HeldByDoc struct {
	// Gate is the gate's state: breaker_open, probing or paused.
	Gate policy.GateState `json:"gate"`
	// Level is whose gate it is: "organisation" (the breaker partition of
	// the callout's own organisation) or "endpoint" (the endpoint's own
	// breaker, or its pause) — the words of breaker.partition.
	Level string `json:"level"`
	// Until is when the gate may open again; absent when not known.
	Until *time.Time `json:"until,omitempty"`
}

// The levels of HeldByDoc.
const (
	HeldByOrganisation = "organisation"
	HeldByEndpoint     = "endpoint"
)
