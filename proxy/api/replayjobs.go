package api

import (
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// ReplayJob is a replay job and its progress on the wire (contract §8): GET
// /admin/v1/replay-jobs/{id}, each entry of GET /admin/v1/replay-jobs, and
// the answer to creating or cancelling one. It is the one replay-job type
// of the API; the store keeps policy.ReplayJob.
//
// State is queued, running, cancelling, cancelled, completed or failed.
// Phase, while running, is collect (matching dead letters are being
// gathered: Total grows) or send (Total is final; Done of Total handled).
// Every handled dead letter is exactly one of Sent (a new replay chain),
// WouldSend (a dry run's: the real run would make a new chain — the dry
// run applies the real run's rules to each dead letter),
// Skipped (already replayed, superseded by a newer dead letter, or gone),
// Refused (endpoint disabled or no longer configured, backlog full) or
// Failed (store error, or its replica died while sending it); Done is their
// sum, and Total − Done of a cancelled job were never sent. Rate is dead
// letters per second. Filters are as created, each without an until given
// the creation time; IDCount counts the ids it was given. Times are RFC
// 3339 in UTC.
type ReplayJob struct {
	ID          string          `json:"id"`
	State       policy.JobState `json:"state"`
	Phase       policy.JobPhase `json:"phase,omitempty"`
	DryRun      bool            `json:"dry_run"`
	Rate        float64         `json:"rate"`
	Filters     []ReplayFilter  `json:"filters,omitempty"`
	IDCount     int             `json:"id_count,omitempty"`
	CreatedBy   string          `json:"created_by"`
	CreatedAt   time.Time       `json:"created_at"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	UpdatedAt   time.Time       `json:"updated_at"`
	CancelledBy string          `json:"cancelled_by,omitempty"`
	CancelledAt *time.Time      `json:"cancelled_at,omitempty"`
	Total       int             `json:"total"`
	Done        int             `json:"done"`
	Sent        int             `json:"sent"`
	WouldSend   int             `json:"would_send"`
	Skipped     int             `json:"skipped"`
	Refused     int             `json:"refused"`
	Failed      int             `json:"failed"`
	Error       string          `json:"error,omitempty"`
}

// ReplayJobSpec is the body of POST /admin/v1/replay-jobs (contract §8
// "filtered ... and bulk"): every dead letter matching any of Filters, and
// every dead letter of IDs (at most 10,000), each replayed at most once
// however they overlap. DryRun collects what would be replayed and sends
// nothing; Rate is dead letters per second, 0.1–1000, 0 for the default 10.
// Unknown fields are refused.
type ReplayJobSpec struct {
	Filters []ReplayFilter `json:"filters,omitempty"`
	IDs     []string       `json:"ids,omitempty"`
	DryRun  bool           `json:"dry_run,omitempty"`
	Rate    float64        `json:"rate,omitempty"`
}

// ReplayFilter selects dead letters (contract §8 "filtered (endpoint, time
// range, status code, reason)"): every part that is set must match; an
// empty part matches everything. Endpoints are endpoint names (none: every
// endpoint); Since and Until bound the time it became a dead letter, both
// inclusive, RFC 3339 (absent: unbounded); Statuses are last upstream
// statuses, 100–599, or 0 for none; Reasons are exhausted, permanent,
// ambiguous or endpoint_disabled. At most 100 of each. Unresolved keeps
// only dead letters whose replays have not succeeded (never replayed,
// pending, failed again). The replay service's filter (replay.Filter) is
// this type, with its validation and matching.
type ReplayFilter struct {
	Endpoints  []string                  `json:"endpoints,omitempty"`
	Since      time.Time                 `json:"since,omitzero"`
	Until      time.Time                 `json:"until,omitzero"`
	Statuses   []int                     `json:"statuses,omitempty"`
	Reasons    []policy.DeadLetterReason `json:"reasons,omitempty"`
	Unresolved bool                      `json:"unresolved,omitempty"`
}

// ReplayJobList is the body of GET /admin/v1/replay-jobs?limit=N (default
// 20, newest first).
type ReplayJobList struct {
	Jobs []ReplayJob `json:"jobs"`
}

// ReplayJobItemDoc is one dead letter of a replay job. Status is queued,
// sending, would_send (dry run), sent, skipped, refused or failed; Detail
// a short code saying why (already_replayed, superseded, not_found,
// not_sent, endpoint_disabled, unknown_endpoint, backlog_full,
// interrupted, store_unavailable). ReplayID is the new chain (sent) or the
// chain or newer dead letter holding its key (skipped). DeadLetter is its
// summary while it is kept.
type ReplayJobItemDoc struct {
	DeadLetterID string                `json:"dead_letter_id"`
	Status       policy.ItemStatus     `json:"status"`
	ReplayID     string                `json:"replay_id,omitempty"`
	Detail       string                `json:"detail,omitempty"`
	DeadLetter   *DeadLetterSummaryDoc `json:"dead_letter,omitempty"`
}

// ReplayJobItems is the body of GET /admin/v1/replay-jobs/{id}/items
// ?offset=&limit=: items in collection order; NextOffset, when set, is the
// offset of the next page.
type ReplayJobItems struct {
	Items      []ReplayJobItemDoc `json:"items"`
	NextOffset int                `json:"next_offset,omitempty"`
}
