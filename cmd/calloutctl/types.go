package main

import (
	"net/http"
	"time"
)

// The admin API's JSON documents (proxy/admin.go, admin_deadletters.go,
// admin_replayjobs.go), decoded as calloutctl needs them. calloutctl talks
// to the API over HTTP only, so it keeps its own copy of their shapes.

// deadLetter is one entry of GET /admin/v1/dead-letters.
type deadLetter struct {
	ID             string     `json:"id"`
	Endpoint       string     `json:"endpoint"`
	DeadLetteredAt time.Time  `json:"dead_lettered_at"`
	Reason         string     `json:"reason"`
	Status         int        `json:"status"`
	Method         string     `json:"method"`
	Path           string     `json:"path"`
	Attempts       int        `json:"attempts"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	SourceRecord   string     `json:"source_record,omitempty"`
	ReplayOf       string     `json:"replay_of,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	ReplayedBy     string     `json:"replayed_by,omitempty"`
	ReplayedAt     *time.Time `json:"replayed_at,omitempty"`
}

// deadLetterList is GET /admin/v1/dead-letters.
type deadLetterList struct {
	Items      []deadLetter `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// attempt is one attempt of a callout document.
type attempt struct {
	N          int       `json:"n"`
	Kind       string    `json:"kind"`
	StartedAt  time.Time `json:"started_at"`
	DurationMs int64     `json:"duration_ms"`
	Status     int       `json:"status,omitempty"`
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error,omitempty"`
}

// calloutDoc is GET /admin/v1/dead-letters/{id} and /admin/v1/callouts/{id}.
type calloutDoc struct {
	ID               string     `json:"id"`
	Endpoint         string     `json:"endpoint"`
	Issuer           string     `json:"issuer"`
	Method           string     `json:"method"`
	Path             string     `json:"path"`
	IdempotencyKey   string     `json:"idempotency_key,omitempty"`
	SourceRecord     string     `json:"source_record,omitempty"`
	State            string     `json:"state"`
	Outcome          string     `json:"outcome"`
	Attempts         []attempt  `json:"attempts"`
	NextAttemptAt    *time.Time `json:"next_attempt_at,omitempty"`
	ReplayOf         string     `json:"replay_of,omitempty"`
	DeadLetterReason string     `json:"dead_letter_reason,omitempty"`
	LastError        string     `json:"last_error,omitempty"`
	Response         *struct {
		Status        int         `json:"status"`
		Headers       http.Header `json:"headers"`
		Body          string      `json:"body"`
		BodyEncoding  string      `json:"body_encoding,omitempty"`
		BodyTruncated bool        `json:"body_truncated,omitempty"`
	} `json:"response,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	FirstAttemptAt *time.Time `json:"first_attempt_at,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	Request        struct {
		Method       string      `json:"method"`
		Path         string      `json:"path"`
		Query        string      `json:"query,omitempty"`
		Headers      http.Header `json:"headers"`
		Body         string      `json:"body"`
		BodyEncoding string      `json:"body_encoding,omitempty"`
		BodyBytes    int         `json:"body_bytes"`
	} `json:"request"`
	ReplayedBy string     `json:"replayed_by,omitempty"`
	ReplayedAt *time.Time `json:"replayed_at,omitempty"`
}

// replayResult is POST /admin/v1/dead-letters/{id}/replay.
type replayResult struct {
	DeadLetterID string `json:"dead_letter_id"`
	Endpoint     string `json:"endpoint"`
	ReplayID     string `json:"replay_id"`
	Created      bool   `json:"created"`
	State        string `json:"state"`
}

// filter is one filter of a replay job (replay.Filter).
type filter struct {
	Endpoints []string   `json:"endpoints,omitempty"`
	Since     *time.Time `json:"since,omitempty"`
	Until     *time.Time `json:"until,omitempty"`
	Statuses  []int      `json:"statuses,omitempty"`
	Reasons   []string   `json:"reasons,omitempty"`
}

// jobSpec is the body of POST /admin/v1/replay-jobs (replay.Spec).
type jobSpec struct {
	Filters []filter `json:"filters,omitempty"`
	IDs     []string `json:"ids,omitempty"`
	DryRun  bool     `json:"dry_run,omitempty"`
	Rate    float64  `json:"rate,omitempty"`
}

// job is a replay job (GET /admin/v1/replay-jobs/{id}).
type job struct {
	ID          string     `json:"id"`
	State       string     `json:"state"`
	Phase       string     `json:"phase,omitempty"`
	DryRun      bool       `json:"dry_run"`
	Rate        float64    `json:"rate"`
	Filters     []filter   `json:"filters,omitempty"`
	IDCount     int        `json:"id_count,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	UpdatedAt   time.Time  `json:"updated_at"`
	CancelledBy string     `json:"cancelled_by,omitempty"`
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
	Total       int        `json:"total"`
	Done        int        `json:"done"`
	Sent        int        `json:"sent"`
	Skipped     int        `json:"skipped"`
	Refused     int        `json:"refused"`
	Failed      int        `json:"failed"`
	Error       string     `json:"error,omitempty"`
}

// final reports whether the job has ended.
func (j job) final() bool {
	return j.State == "completed" || j.State == "cancelled" || j.State == "failed"
}

// jobList is GET /admin/v1/replay-jobs.
type jobList struct {
	Jobs []job `json:"jobs"`
}

// jobItem is one entry of GET /admin/v1/replay-jobs/{id}/items.
type jobItem struct {
	DeadLetterID string      `json:"dead_letter_id"`
	Status       string      `json:"status"`
	ReplayID     string      `json:"replay_id,omitempty"`
	Detail       string      `json:"detail,omitempty"`
	DeadLetter   *deadLetter `json:"dead_letter,omitempty"`
}

// jobItems is GET /admin/v1/replay-jobs/{id}/items.
type jobItems struct {
	Items      []jobItem `json:"items"`
	NextOffset int       `json:"next_offset,omitempty"`
}

// endpointDoc is one endpoint of GET /admin/v1/endpoints.
type endpointDoc struct {
	Name                string     `json:"name"`
	Gate                string     `json:"gate"`
	Breaker             string     `json:"breaker"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	NextProbeAt         *time.Time `json:"next_probe_at,omitempty"`
	PausedUntil         *time.Time `json:"paused_until,omitempty"`
	Disabled            bool       `json:"disabled"`
	DisabledReason      string     `json:"disabled_reason,omitempty"`
	BacklogItems        int64      `json:"backlog_items"`
	InFlight            int64      `json:"in_flight"`
	DeadLetters         int64      `json:"dead_letters"`
}

// endpointList is GET /admin/v1/endpoints.
type endpointList struct {
	Endpoints []endpointDoc `json:"endpoints"`
}

// endpointAction is POST /admin/v1/endpoints/{name}/enable|disable|breaker/reset.
type endpointAction struct {
	Action       string       `json:"action"`
	Changed      bool         `json:"changed"`
	DeadLettered []string     `json:"dead_lettered,omitempty"`
	Endpoint     *endpointDoc `json:"endpoint,omitempty"`
}

// problemDoc is an RFC 9457 problem document.
type problemDoc struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	CalloutID string `json:"callout_id,omitempty"`
}
