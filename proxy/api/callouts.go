package api

import (
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// IdempotencyKeyDoc is the body of GET /admin/v1/idempotency-keys
// ?endpoint=&key=[&issuer=]: the callouts holding an Idempotency-Key on an
// endpoint, one per organisation (contract §5: the scope is issuer, endpoint,
// key). IdempotencyKey is the key without sf-string quotes, as the status
// document shows it.
type IdempotencyKeyDoc struct {
	Endpoint       string         `json:"endpoint"`
	IdempotencyKey string         `json:"idempotency_key"`
	Holders        []KeyHolderDoc `json:"holders"`
}

// KeyHolderDoc is one callout holding a key: its organisation (the JWT
// issuer) and id; GET /admin/v1/callouts/{callout_id} reads it.
type KeyHolderDoc struct {
	Issuer    string `json:"issuer"`
	CalloutID string `json:"callout_id"`
}

// CalloutSummaryDoc is one pending callout of GET /admin/v1/callouts
// ?endpoint=&state= (contract §4 states scheduled, held, in_flight). Times are
// RFC 3339 in UTC; NextAttemptAt is when it is due (scheduled, held) or
// when its lease ends (in_flight).
type CalloutSummaryDoc struct {
	ID             string       `json:"id"`
	Endpoint       string       `json:"endpoint"`
	State          policy.State `json:"state"`
	Method         string       `json:"method"`
	Path           string       `json:"path"`
	IdempotencyKey string       `json:"idempotency_key,omitempty"`
	SourceRecord   string       `json:"source_record,omitempty"`
	ReplayOf       string       `json:"replay_of,omitempty"`
	Attempts       int          `json:"attempts"`
	CreatedAt      time.Time    `json:"created_at"`
	NextAttemptAt  *time.Time   `json:"next_attempt_at,omitempty"`
	// Issuer is the organisation (JWT issuer) that sent it; LastError its
	// last error, redacted (absent before a failed attempt).
	Issuer    string `json:"issuer,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// CalloutList is the body of GET /admin/v1/callouts?endpoint=&state=
// &cursor=&limit=: one page, soonest due first; NextCursor, when set, is
// the cursor of the next page.
type CalloutList struct {
	Items      []CalloutSummaryDoc `json:"items"`
	NextCursor string              `json:"next_cursor,omitempty"`
}
