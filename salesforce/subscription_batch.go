package salesforce

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
	"github.com/calloutproxy/callout-proxy/salesforce/pubsubapi"
)

// errLeaseLost ends a stream whose replica no longer holds the lease.
var errLeaseLost = errors.New("salesforce: the Pub/Sub subscriber lease was lost")

// poll runs one poll (Reprocessor.Poll) and notes the requests it
// deferred or found claimed to look at again; one that ran and succeeded
// covers every change before it, so no catch-up poll is due after it. It
// reports whether it ran. Errors: the poll's, the state's.
func (s *Subscription) poll(ctx context.Context) (bool, error) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	return s.pollLocked(ctx)
}

// pollLocked is poll with s.pollMu held.
func (s *Subscription) pollLocked(ctx context.Context) (bool, error) {
	rep, err := s.p.Poll(ctx)
	if derr := s.o.State.Defer(ctx, append(rep.DeferredIDs, rep.ClaimedIDs...), ReprocessLease); err == nil {
		err = derr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rep.Polled {
		s.counts.Polls++
	}
	if rep.Polled && err == nil {
		s.catchUpDue = false
	}
	return rep.Polled, err
}

// catchUp runs the catch-up poll when one is due and reports whether none
// is due any more.
//
// The stream's goroutine and Step may both find it due: the poll lock is
// taken before due is read, so the second finds the first's poll done and
// runs none (one catch-up poll, not two).
func (s *Subscription) catchUp(ctx context.Context) bool {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	s.mu.Lock()
	due := s.catchUpDue
	s.mu.Unlock()
	if !due {
		return true
	}
	polled, err := s.pollLocked(ctx)
	switch {
	case err != nil:
		s.log.Warn("catch-up poll failed: no replay id is stored until it ran", slog.Any("error", err))
	case !polled:
		s.log.Info("catch-up poll waits: another replica holds the poll lock, or writes are paused")
	}
	return polled && err == nil
}

// changeEvent is what the subscription reads of a Failed_Callout__c change
// event ("Change Event Message Structure", "ChangeEventHeader Fields";
// every other field is skipped).
type changeEvent struct {
	Header struct {
		EntityName string   `avro:"entityName"`
		RecordIDs  []string `avro:"recordIds"`
		ChangeType string   `avro:"changeType"`
		// ChangedFields is a bitmap of the fields an update changed
		// ("Event Deserialization Considerations"); empty for a create.
		ChangedFields []string `avro:"changedFields"`
	} `avro:"ChangeEventHeader"`
	// Status is the new Status__c: nil when an update left it alone
	// (unchanged fields are null in a Pub/Sub API change event, "Change
	// Event Body Fields").
	Status *string `avro:"Status__c"`
}

// statusField is the field whose changes the subscription follows.
const statusField = "Status__c"

// requests returns the record ids of ev when it is a Failed_Callout__c
// change that set Status__c to Reprocess Requested or Discarded, and
// whether ev is a gap event of the object (changeType GAP_*: header only,
// "Gap Events"; GAP_OVERFLOW, "Overflow Events").
func (s *Subscription) requests(ctx context.Context, ev *pubsubapi.ConsumerEvent) (ids []string, gap bool, err error) {
	var ce changeEvent
	if err := s.o.PubSub.Decode(ctx, ev.GetEvent(), &ce); err != nil {
		return nil, false, err
	}
	h := ce.Header
	if h.EntityName != FailedCalloutObject {
		return nil, false, nil
	}
	switch {
	case strings.HasPrefix(h.ChangeType, "GAP_"):
		return nil, true, nil
	case h.ChangeType == "UPDATE":
		changed, err := s.o.PubSub.BitmapFields(ctx, ev.GetEvent().GetSchemaId(), h.ChangedFields)
		if err != nil || !slices.Contains(changed, statusField) {
			return nil, false, err
		}
	case h.ChangeType != "CREATE" && h.ChangeType != "UNDELETE":
		return nil, false, nil // DELETE: nothing to reprocess
	}
	if ce.Status != nil && (*ce.Status == policy.RecordReprocessRequested || *ce.Status == policy.RecordDiscarded) {
		return h.RecordIDs, false, nil
	}
	return nil, false, nil
}

// batch handles one FetchResponse: the records whose status became
// Reprocess Requested or Discarded, a catch-up poll for a gap event, then
// stores the batch's replay id (not while a catch-up poll is due).
func (s *Subscription) batch(ctx context.Context, b pubsub.Batch) error {
	var ids []string
	gaps := 0
	for _, ev := range b.Events {
		more, gap, err := s.requests(ctx, ev)
		if err != nil {
			return err
		}
		ids = append(ids, more...)
		if gap {
			gaps++
		}
	}
	if gaps > 0 {
		s.log.Warn("Change Data Capture gap events: polling to catch up", slog.Int("events", gaps))
		s.mu.Lock()
		s.catchUpDue = true
		s.counts.Gaps += gaps
		s.mu.Unlock()
	}
	if len(ids) > 0 {
		if err := s.handle(ctx, ids, false); err != nil {
			return err // not stored: the batch comes again after the last stored replay id
		}
	}
	s.mu.Lock()
	s.counts.Batches++
	s.counts.Events += len(b.Events)
	s.mu.Unlock()
	if len(b.ReplayID) == 0 || !s.catchUp(ctx) {
		return nil
	}
	saved, err := s.o.State.SaveReplayID(ctx, s.owner, b.ReplayID)
	if err != nil {
		return err
	}
	if !saved {
		return errLeaseLost
	}
	s.mu.Lock()
	s.counts.Stored++
	s.mu.Unlock()
	return nil
}

// handle hands ids to Reprocessor.changes (see there) and counts what
// they did.
func (s *Subscription) handle(ctx context.Context, ids []string, retried bool) error {
	res, err := s.p.changes(ctx, s.o.State, ids, retried)
	s.count(res)
	return err
}

// retryDue looks again at the deferred requests whose time came
// (Reprocessor.lookAgain).
func (s *Subscription) retryDue(ctx context.Context) {
	res, err := s.p.lookAgain(ctx, s.o.State)
	s.count(res)
	if err != nil {
		s.log.Warn("deferred reprocess requests: looking again failed", slog.Any("error", err))
	}
}

// count adds what HandleChanges did to the counts.
func (s *Subscription) count(res Changes) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Replayed += res.Report.Replayed
	s.counts.Answered += res.Report.Answered
}
