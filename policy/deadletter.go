package policy

import "time"

// DeadLetterQuery selects one page of an endpoint's dead letters.
type DeadLetterQuery struct {
	Endpoint string
	// Since and Until bound the dead-lettered-at time, both inclusive;
	// zero: unbounded.
	Since, Until time.Time
	// Cursor is the previous page's Next; "" for the first page.
	Cursor string
	// Limit is the page size: 1–1000, default 100.
	Limit int
}

// DeadLetter is a dead letter's summary, enough to list and filter them
// (SPEC §8 filtered replay: endpoint, time range, status code, reason).
// Get returns the whole record.
type DeadLetter struct {
	ID             string
	Endpoint       string
	DeadLetteredAt time.Time
	Reason         DeadLetterReason
	// Status is the last upstream response's status, 0 when none.
	Status         int
	Method         string
	Path           string
	Attempts       int
	IdempotencyKey string
	SourceRecord   string
	ReplayOf       string
	LastError      string
	// ReplayedBy and ReplayedAt name the latest replay chain of this dead
	// letter and when it was created (ReplayStore.MarkReplayed); empty
	// when it was never replayed.
	ReplayedBy string
	ReplayedAt time.Time
}

// DeadLetterPage is one page of dead letters, oldest first.
type DeadLetterPage struct {
	Items []DeadLetter
	// Next is the cursor of the following page; "" when this is the last.
	Next string
}

// ReplayMark is what MarkReplayed noted on a dead letter.
type ReplayMark struct {
	// ReplayedBy is the latest replay chain's callout id; "" when the dead
	// letter was never replayed.
	ReplayedBy string
	// ReplayedAt is when that chain was created; zero when never.
	ReplayedAt time.Time
}
