package policy

import (
	"strings"
	"time"
)

// The Salesforce outbox's domain (contract §7: "Salesforce writes (dead
// letters, status changes, notifications, completion events) go through a
// durable outbox in Redis"): the names of its entries, a claimed entry, how
// a consumer settles it, the state of a Failed_Callout__c record and the
// deferral of writes after failed calls. The store's outbox
// (proxy/redisstore/outbox) keeps them; the salesforce package consumes
// them through an interface of its own over these types.

// Outbox entry kinds. An entry is named kind ":" keys (EntryName). The
// store's scripts queue m, e, o and d entries in the same script as the
// change that causes them (the dead letter, the ending, the disable), and
// s entries with the record state they write.
const (
	// EntryMirror, "m:{callout id}": mirror the dead letter to its
	// Failed_Callout__c record. Queued with the dead letter.
	EntryMirror = "m"
	// EntryResult, "e:{callout id}": publish the Callout_Result__e of a
	// scheduled callout that ended (contract §8). Queued with the ending.
	EntryResult = "e"
	// EntryOutage, "o:{endpoint}:{callout id}": tell the endpoint's owner an
	// outage began; the id is its first dead letter (contract §6). Queued with
	// that dead letter.
	EntryOutage = "o"
	// EntryDisabled, "d:{endpoint}:{ms}": tell the endpoint's owner it was
	// disabled at ms (contract §6). Queued by the disable.
	EntryDisabled = "d"
	// EntryStatus, "s:{root id}": write the status the record of root must
	// show (RecordState), queued with a StatusChange or by the expiry check.
	EntryStatus = "s"
)

// EntryName joins a kind and its keys into an entry name: EntryName("m",
// id) is "m:" + id. Keys must not contain ':' (callout ids and endpoint
// names never do).
func EntryName(kind string, keys ...string) string {
	return kind + ":" + strings.Join(keys, ":")
}

// SplitEntry splits an entry name into its kind and keys (EntryName's
// inverse).
func SplitEntry(name string) (kind string, keys []string) {
	parts := strings.Split(name, ":")
	return parts[0], parts[1:]
}

// OutboxEntry is one claimed outbox entry.
type OutboxEntry struct {
	// Shard is the store shard whose outbox holds it (0 … 127).
	Shard int
	// Name is kind ":" keys (EntryName).
	Name string
	// Payload is what was queued with it ("" for entries the store's
	// scripts queue, which carry everything in their name).
	Payload string
	// Tries counts its failed tries so far (acks with VerdictRetry).
	Tries int
	// Lease is the claim's fence (ms precision): pass it back with the
	// acks of the entries it was claimed with.
	Lease time.Time
}

// Verdict is how a consumer settles a claimed entry.
type Verdict string

// The verdicts.
const (
	// VerdictDone: written; the entry goes (see OutboxAck.Root).
	VerdictDone Verdict = "done"
	// VerdictRetry: failed; due again at OutboxAck.At, one more failed try.
	VerdictRetry Verdict = "retry"
	// VerdictDefer: not tried (writes paused or slowed); due again at
	// OutboxAck.At, nothing counted.
	VerdictDefer Verdict = "defer"
)

// OutboxAck settles one claimed entry.
type OutboxAck struct {
	// Name is the entry's (OutboxEntry.Name).
	Name    string
	Verdict Verdict
	// At is when a retried or deferred entry is due again (ms precision).
	At time.Time
	// Error is a retried entry's error, kept for reporting (no secrets).
	Error string
	// SetPayload replaces a retried entry's payload with Payload (e.g. the
	// targets of a notification still to reach; "" drops it).
	SetPayload bool
	Payload    string
	// Root and Version fence a done record write: when the record's state
	// version (RecordState.Version) is no longer Version, the entry is due
	// again at once instead of going, so the newer state is written too.
	// Root "" (and Version 0): no fence.
	Root    string
	Version int64
	// Forget, with Root, drops the record's state once the entry goes (its
	// last write, Expired, is done).
	Forget bool
}

// RecordState is what the Failed_Callout__c record of one root (the dead
// letter it was created for) must show, whatever order its writes are sent
// in (contract §7, §8): its replay chains write to the same record.
type RecordState struct {
	// Status is the Status__c to write (one of RecordStatuses); "" when
	// none was set (the record shows its dead letter as New).
	Status string
	// Replay is the latest replay chain's callout id; "" when none.
	Replay string
	// At is the time of the event that set Status (ms precision).
	At time.Time
	// Version counts the changes; 0 when the record has no state.
	Version int64
	// Answered is the latest SystemModstamp of an admin's request
	// (Reprocess Requested) that a status of the proxy answered: the
	// proxy may write its status over that request, and over no admin
	// choice made after it. Zero when none.
	Answered time.Time
}

// StatusChange is a change of what a record must show.
type StatusChange struct {
	// Status is the new Status__c (one of RecordStatuses).
	Status string
	// Replay, when set, is the record's latest replay chain.
	Replay string
	// Copy, when set, is a replay dead letter whose record is root's: the
	// store's RootOf(Copy) returns root afterwards.
	Copy string
	// At is when the event happened (the clock's now when zero). A change
	// older than the record's current status is ignored.
	At time.Time
	// Write queues the record's write (an EntryStatus entry, due now).
	Write bool
	// Answers, when set, is the SystemModstamp of the admin's request
	// (Reprocess Requested) this change answers; RecordState.Answered
	// keeps the latest. Kept even when the change itself is older.
	Answers time.Time
}

// Deferral holds back the Salesforce writes of one scope after failed
// calls (contract §8 "Salesforce writes are batched"): the scope is "" for
// every write, or an sObject's API name (its writes only).
type Deferral struct {
	// Until is when the writes may be tried again (ms precision).
	Until time.Time
	// Fails counts the failed calls in a row behind it.
	Fails int
}
