package policy

import "time"

// JobState is a replay job's state (contract §8 "replay jobs").
type JobState string

// JobPhase is what a running job is doing.
type JobPhase string

// ReplayJob is a replay job as stored. Counters count items: Total collected,
// then each handled item is exactly one of Sent (WouldSend in a dry run),
// Skipped, Refused, Failed.
type ReplayJob struct {
	ID string
	// Spec is what to replay, as its creator encoded it (the replay
	// package's JSON); the store does not read it.
	Spec      string
	State     JobState
	Phase     JobPhase
	CreatedBy string
	CreatedAt time.Time
	// StartedAt is when a replica first took it; zero while queued.
	StartedAt time.Time
	// FinishedAt is when it ended; zero until then.
	FinishedAt time.Time
	// UpdatedAt is its last change (progress included).
	UpdatedAt   time.Time
	CancelledBy string
	CancelledAt time.Time
	Total       int
	Sent        int
	WouldSend   int
	Skipped     int
	Refused     int
	Failed      int
	// Error says why a job failed.
	Error string
	// Position is where collection got to (opaque, the collector's).
	Position string
	// Index is the send position: the queue index of the next item.
	Index int
	// Owner is the token of the replica holding its lease ("" when none),
	// until LeaseExpiresAt.
	Owner          string
	LeaseExpiresAt time.Time
}

// ItemStatus is the state of one dead letter in a replay job.
type ItemStatus string

// ReplayItem is one dead letter of a replay job.
type ReplayItem struct {
	DeadLetterID string
	Status       ItemStatus
	// ReplayID is the replay chain's callout id: the new one (sent), or
	// the chain already holding the dead letter's key (skipped).
	ReplayID string
	// Detail is a short code saying why (e.g. already_replayed,
	// endpoint_disabled, interrupted); "" for a plain send.
	Detail string
}

// The replay-job states.
const (
	// JobQueued: created; no replica has started it yet.
	JobQueued JobState = "queued"
	// JobRunning: a replica is collecting or sending its dead letters.
	JobRunning JobState = "running"
	// JobCancelling: an admin asked to cancel it; its replica stops before
	// its next item.
	JobCancelling JobState = "cancelling"
	// JobCancelled: stopped by an admin part-way (or before it started).
	JobCancelled JobState = "cancelled"
	// JobCompleted: every collected dead letter was handled (for a dry
	// run: each judged as the real run would, nothing sent).
	JobCompleted JobState = "completed"
	// JobFailed: stopped by an error that retrying cannot fix (Job.Error
	// says which, e.g. more dead letters match than a job may hold).
	JobFailed JobState = "failed"
)

// The phases of a running job: first every matching dead letter is
// collected into the job's queue (so its total is known before anything is
// sent), then the queue is sent in order (a dry run judges each item
// instead, sending nothing).
const (
	PhaseCollect JobPhase = "collect"
	PhaseSend    JobPhase = "send"
)

// The item states: queued, sending and would-send before a result; sent,
// skipped, refused and failed are results (JobItem.Detail says why).
const (
	ItemQueued    ItemStatus = "queued"     // collected, not yet sent
	ItemSending   ItemStatus = "sending"    // claimed by a replica, result not yet recorded
	ItemWouldSend ItemStatus = "would_send" // a dry run's item the real run would send; nothing is sent
	ItemSent      ItemStatus = "sent"       // a new replay chain was created (JobItem.ReplayID)
	ItemSkipped   ItemStatus = "skipped"    // nothing to do: already replayed, or gone
	ItemRefused   ItemStatus = "refused"    // the endpoint is disabled or unknown, or its backlog full
	ItemFailed    ItemStatus = "failed"     // a store error, or its replica died while sending it
)

// Final reports whether the state is final.
func (s JobState) Final() bool {
	return s == JobCancelled || s == JobCompleted || s == JobFailed
}
