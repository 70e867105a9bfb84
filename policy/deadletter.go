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

// The values of Failed_Callout__c.Status__c, the dead letter's status as
// admins see it in Salesforce (SPEC §7, §8), in the order of their life: New
// when first written; Reprocess Requested by an admin; Reprocessing, then
// Reprocessed or Failed Again, around a replay; Discarded by an admin (the
// proxy then deletes its copy); Expired when the proxy's copy is gone. The
// one definition: the salesforce writer and the store's scripts both use
// these, and salesforce's metadata test checks them against the picklist.
const (
	RecordNew                = "New"
	RecordReprocessRequested = "Reprocess Requested"
	RecordReprocessing       = "Reprocessing"
	RecordReprocessed        = "Reprocessed"
	RecordFailedAgain        = "Failed Again"
	RecordDiscarded          = "Discarded"
	RecordExpired            = "Expired"
)

// RecordStatuses are the Status__c values above, in that order.
var RecordStatuses = []string{RecordNew, RecordReprocessRequested, RecordReprocessing, RecordReprocessed,
	RecordFailedAgain, RecordDiscarded, RecordExpired}
