package api

import (
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// DeadLetterSummaryDoc is one dead letter of GET /admin/v1/dead-letters and
// of a replay job's items (contract §7). Times are RFC 3339 in UTC with
// millisecond precision. Reason is exhausted, permanent, ambiguous or
// endpoint_disabled; Status the last upstream status, 0 when the callout
// never got an answer. LastError is redacted. ReplayedBy is the latest
// replay chain made of it, at ReplayedAt; ReplayOutcome what became of it
// (the chain followed through replays of failed replays): pending,
// succeeded or failed_again (absent when never replayed).
type DeadLetterSummaryDoc struct {
	ID             string                  `json:"id"`
	Endpoint       string                  `json:"endpoint"`
	DeadLetteredAt time.Time               `json:"dead_lettered_at"`
	Reason         policy.DeadLetterReason `json:"reason"`
	Status         int                     `json:"status"`
	Method         string                  `json:"method"`
	Path           string                  `json:"path"`
	Attempts       int                     `json:"attempts"`
	IdempotencyKey string                  `json:"idempotency_key,omitempty"`
	SourceRecord   string                  `json:"source_record,omitempty"`
	ReplayOf       string                  `json:"replay_of,omitempty"`
	LastError      string                  `json:"last_error,omitempty"`
	ReplayedBy     string                  `json:"replayed_by,omitempty"`
	ReplayedAt     *time.Time              `json:"replayed_at,omitempty"`
	ReplayOutcome  policy.Resolution       `json:"replay_outcome,omitempty"`
}

// DeadLetterList is the body of GET /admin/v1/dead-letters: one page, by
// endpoint name then oldest first. NextCursor, when set, is the cursor
// query parameter of the next page; a page may be short (even empty) and
// still have one.
type DeadLetterList struct {
	Items      []DeadLetterSummaryDoc `json:"items"`
	NextCursor string                 `json:"next_cursor,omitempty"`
}

// CalloutDoc is GET /admin/v1/dead-letters/{id} and /admin/v1/callouts/{id}:
// the status document (contract §4) of any organisation's callout plus what an
// operator needs to judge a replay: the request as the caller sent it and
// the record's times. Secrets are redacted (contract §7); the stored copy
// keeps them for the replay.
type CalloutDoc struct {
	StatusDocument
	// Issuer is the JWT issuer (the organisation) that sent the callout.
	Issuer         string     `json:"issuer"`
	CreatedAt      time.Time  `json:"created_at"`
	FirstAttemptAt *time.Time `json:"first_attempt_at,omitempty"`
	// FinishedAt is when it ended; for a dead letter, when it became one.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Request    RequestDoc `json:"request"`
	// ReplayedBy is the latest replay chain made of this dead letter, at
	// ReplayedAt; ReplayOutcome what became of it, as in
	// DeadLetterSummaryDoc.
	ReplayedBy    string            `json:"replayed_by,omitempty"`
	ReplayedAt    *time.Time        `json:"replayed_at,omitempty"`
	ReplayOutcome policy.Resolution `json:"replay_outcome,omitempty"`
}

// RequestDoc is the caller's request as stored. Query and Headers and a
// JSON or form Body are redacted; Body is text when valid UTF-8, else
// base64 with BodyEncoding "base64". BodyBytes is the stored body's size
// in bytes.
type RequestDoc struct {
	Method       string      `json:"method"`
	Path         string      `json:"path"`
	Query        string      `json:"query,omitempty"`
	Headers      http.Header `json:"headers"`
	Body         string      `json:"body"`
	BodyEncoding string      `json:"body_encoding,omitempty"`
	BodyBytes    int         `json:"body_bytes"`
}

// ReplayResultDoc is the body of POST /admin/v1/dead-letters/{id}/replay:
// 202 with Created true and Location /admin/v1/callouts/{replay_id} for a
// new chain; 200 with Created false when a chain that has not
// dead-lettered already holds the dead letter's Idempotency-Key (ReplayID
// names it; nothing was sent). State is ReplayID's state.
type ReplayResultDoc struct {
	DeadLetterID string       `json:"dead_letter_id"`
	Endpoint     string       `json:"endpoint"`
	ReplayID     string       `json:"replay_id"`
	Created      bool         `json:"created"`
	State        policy.State `json:"state"`
}
