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
// (contract §8 filtered replay: endpoint, time range, status code, reason).
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
	// letter and when it was created (proxy/redisstore/deadletters Store.MarkReplayed); empty
	// when it was never replayed.
	ReplayedBy string
	ReplayedAt time.Time
	// ReplayOutcome is the final state of that chain (Succeeded,
	// DeadLettered) once it ended; "" while it is pending or when the dead
	// letter was never replayed.
	ReplayOutcome State
	// Resolution is what became of its replays, the chain followed; ""
	// when never replayed. The store leaves it empty; the replay service's
	// listing fills it in.
	Resolution Resolution
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
	// ReplayOutcome is that chain's final state once it ended (Succeeded,
	// DeadLettered), at ReplayEndedAt; "" while it is pending.
	ReplayOutcome State
	ReplayEndedAt time.Time
	// Resolution is what became of the replays, the chain followed; ""
	// when never replayed. The store leaves it empty; the replay service
	// fills it in.
	Resolution Resolution
}

// Resolution is what became of a dead letter that was replayed (contract §8:
// the Salesforce record shows Reprocessed or Failed Again), following the
// chain: a replay that dead-lettered and was itself replayed resolves as its
// own replay did.
type Resolution string

// The resolutions. A dead letter never replayed has none ("").
const (
	// ResolutionPending: the latest replay chain has not ended yet.
	ResolutionPending Resolution = "pending"
	// ResolutionSucceeded: the latest replay (or a replay of it) succeeded;
	// nothing is left to do.
	ResolutionSucceeded Resolution = "succeeded"
	// ResolutionFailedAgain: the latest replay ended without success and was
	// not replayed in turn; that chain is a dead letter of its own.
	ResolutionFailedAgain Resolution = "failed_again"
)

// Resolved reports whether nothing is left to do for a dead letter of
// resolution r: its replay succeeded. Never replayed, pending and failed
// again are all unresolved.
func (r Resolution) Resolved() bool { return r == ResolutionSucceeded }

// ResolutionOf is the resolution a replay chain's final state gives its dead
// letter: "" (still pending) → pending, succeeded → succeeded, anything else
// (dead_lettered, failed) → failed again. The caller follows a failed chain
// that was itself replayed to that replay's outcome.
func ResolutionOf(outcome State) Resolution {
	switch outcome {
	case "":
		return ResolutionPending
	case Succeeded:
		return ResolutionSucceeded
	}
	return ResolutionFailedAgain
}

// The values of Failed_Callout__c.Status__c, the dead letter's status as
// admins see it in Salesforce (contract §7, §8), in the order of their life: New
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
