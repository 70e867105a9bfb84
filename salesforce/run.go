package salesforce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// Background timing of Run.
const (
	// ExpirySweepEvery is how often each replica checks dead-letter copies
	// whose expiry time has come.
	ExpirySweepEvery = 30 * time.Second
	// PollOverlap is how far before its watermark a poll looks again:
	// SystemModstamp is set when a transaction starts, so a record can
	// commit with a stamp older than one already seen.
	PollOverlap = 5 * time.Minute
	// KeepMargin is how long a callout record a queued Salesforce write
	// still needs is kept at least (its TTL is raised to it when less is
	// left), and KeepCap how long past its own retention at most: past
	// that the record expires, and the write goes without it (counted in
	// callout_salesforce_writes_dropped_total, alert
	// CalloutSalesforceWritesDropped). docs/salesforce.md "No write lost
	// to its own retention".
	KeepMargin = time.Hour
	KeepCap    = 7 * 24 * time.Hour
	// discardedPoll names the Discarded poll's watermark.
	discardedPoll = "discarded"
)

// Tick writes a batch (Round) when one is ready: PerRound entries are
// due, or the longest-waiting due entry has waited salesforce.batch_linger
// (contract §8: a burst costs about one call per few hundred writes, and a
// lone dead letter waits at most the linger). It returns what the round
// did and how long until a batch may be ready (0: at once, more is due;
// at most outbox_interval). Errors: the outbox's.
func (w *Writer) Tick(ctx context.Context) (Report, time.Duration, error) {
	due, oldest, err := w.o.Outbox.DueStats(ctx)
	if err != nil || due == 0 {
		return Report{}, w.sf.OutboxInterval, err
	}
	if waited := w.o.Now().Sub(oldest); due < PerRound && waited < w.sf.BatchLinger {
		return Report{}, min(w.sf.BatchLinger-waited, w.sf.OutboxInterval), nil
	}
	rep, err := w.Round(ctx)
	if err == nil && rep.Calls > 0 && (rep.Claimed >= PerRound || rep.Overflow > 0) {
		return rep, 0, nil
	}
	return rep, w.sf.OutboxInterval, err
}

// Run writes the outbox until ctx ends: a batch whenever Tick finds one
// ready (it looks again every outbox_interval, sooner when a linger ends,
// at once after a full batch, or when woken), the expiry check every
// ExpirySweepEvery. The Discarded records are polled by the Reprocessor,
// in the same call as the Reprocess Requested ones.
func (w *Writer) Run(ctx context.Context) {
	var swept, kept time.Time
	for {
		_, wait, err := w.Tick(ctx)
		if err != nil {
			w.log.Warn("Salesforce outbox round failed", slog.Any("error", err))
		}
		now := w.o.Now()
		if now.Sub(swept) >= ExpirySweepEvery {
			swept = now
			if _, err := w.SweepExpired(ctx); err != nil {
				w.log.Warn("dead-letter expiry check failed", slog.Any("error", err))
			}
		}
		if now.Sub(kept) >= w.keepEvery() {
			kept = now
			w.KeepPending(ctx)
		}
		if wait <= 0 {
			continue // more is due
		}
		if !sleep(ctx, wait, w.wake) {
			return
		}
	}
}

// sleep waits d, or less when wake gets a value; it returns false at once
// when ctx ends.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}

// keepEvery is how often KeepPending runs: every ExpirySweepEvery, or a
// third of the shorter retention when that is less (a record must be seen
// before its TTL ends).
func (w *Writer) keepEvery() time.Duration {
	every := ExpirySweepEvery
	for _, r := range []time.Duration{w.o.DeadLetterRetention, w.o.IdempotencyRetention} {
		if r > 0 {
			every = min(every, r/3)
		}
	}
	return max(every, 100*time.Millisecond)
}

// KeepPending keeps the callout records that queued dead-letter mirrors
// and completion events still need, for KeepMargin at least and KeepCap
// at most past their retention (Outbox.KeepPending), so that a Salesforce
// outage longer than idempotency_retention or dead_letter_retention delays
// those writes and loses none. It logs the records left to expire at the
// cap, and reports their number in callout_salesforce_outbox_records_at_cap.
// Errors are logged: the next run tries again.
func (w *Writer) KeepPending(ctx context.Context) {
	_, capped, err := w.o.Outbox.KeepPending(ctx, KeepMargin, KeepCap)
	if err != nil {
		w.log.Warn("keeping the records of queued Salesforce writes failed", slog.Any("error", err))
		return
	}
	if w.o.Metrics != nil {
		w.o.Metrics.RecordsAtCap.Set(float64(capped))
	}
	if capped > 0 {
		w.log.Error("queued Salesforce writes waited longer than the cap past their records' retention: "+
			"those records are left to expire, and their writes will go without them",
			slog.Int("records", capped), slog.Duration("cap", KeepCap))
	}
}

// SweepExpired runs the expiry check on every shard with a copy due (contract
// §7: when the proxy's copy expires, the record becomes Expired; no
// keyspace notifications) and returns how many records were marked
// Expired (their writes are queued). Errors: the outbox's.
func (w *Writer) SweepExpired(ctx context.Context) (int, error) {
	shards, err := w.o.Outbox.ExpiryShards(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, shard := range shards {
		for {
			roots, err := w.o.Outbox.Expire(ctx, shard, 1000)
			n += len(roots)
			if err != nil {
				return n, err
			}
			if len(roots) < 1000 {
				break
			}
		}
	}
	if n > 0 {
		w.Wake()
	}
	return n, nil
}

// PollDiscarded asks Salesforce for the Failed_Callout__c records an admin
// set to Discarded since the last poll, and deletes the proxy's copies of
// each (the dead letter and its latest replay chain's, store.Discard; contract
// §7) and notes Discarded in the record's state, so its expiry no longer
// marks it Expired. It returns how many records it handled. Errors: the
// query's or the store's; the watermark then stays, so the next poll looks
// again (handling a record twice is harmless).
func (w *Writer) PollDiscarded(ctx context.Context) (int, error) {
	n := 0
	err := w.pollAll(ctx, []sincePoll{w.discardedPoll(ctx, &n)})
	return n, err
}

// discardedPoll is the Discarded poll (PollDiscarded); n counts the
// records it handled.
func (w *Writer) discardedPoll(ctx context.Context, n *int) sincePoll {
	return sincePoll{name: discardedPoll, object: FailedCalloutObject,
		fields: []string{ExternalIDField, "Replay_Callout_Id__c"},
		where:  "Status__c = " + sfapi.QuoteSOQL(policy.RecordDiscarded), each: func(r sfapi.Record, stamp time.Time) error {
			id, _ := r[ExternalIDField].(string)
			if id == "" {
				return nil
			}
			replay, _ := r["Replay_Callout_Id__c"].(string)
			for _, copyID := range []string{id, replay} {
				if err := w.discard(ctx, copyID); err != nil {
					return err
				}
			}
			*n++
			_, err := w.o.Outbox.SetRecordStatus(ctx, id, policy.StatusChange{Status: policy.RecordDiscarded, At: stamp})
			if errors.Is(err, policy.ErrNotFound) {
				return nil // not an id of ours
			}
			return err
		}}
}

// discard deletes one copy; one already gone or not a dead letter (a
// replay chain still running or succeeded) is left as it is.
func (w *Writer) discard(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	lctx := w.about(ctx, id, "") // before its record is gone
	err := w.o.Store.Discard(ctx, id)
	switch {
	case err == nil:
		w.log.InfoContext(lctx, "dead letter discarded by a Salesforce admin", slog.String("callout_id", id))
		return nil
	case errors.Is(err, policy.ErrNotFound), errors.Is(err, policy.ErrNotDeadLettered):
		return nil
	}
	return err
}

// ErrPollAgain is what a poll's callback returns (alone or wrapped) for a
// record it cannot handle now but should see again: the poll goes on with
// the next records, and its watermark stops at that record's stamp.
var ErrPollAgain = errors.New("salesforce: poll this record again")

// sincePoll is one watermark poll named name: the fields (and
// SystemModstamp) of object's records matching where (a SOQL condition)
// changed since the poll's watermark minus PollOverlap, oldest first; each
// is called with every record and its SystemModstamp.
type sincePoll struct {
	name, object string
	fields       []string
	where        string
	each         func(r sfapi.Record, stamp time.Time) error
}

// statement is the poll's SOQL after watermark mark (zero: none yet).
func (p sincePoll) statement(mark time.Time) string {
	stmt := fmt.Sprintf("SELECT %s, SystemModstamp FROM %s WHERE %s", strings.Join(p.fields, ", "), p.object, p.where)
	if !mark.IsZero() {
		stmt += " AND SystemModstamp >= " + mark.Add(-PollOverlap).UTC().Format(time.RFC3339)
	}
	return stmt + " ORDER BY SystemModstamp ASC"
}

// pollAll runs watermark polls in ONE API call: a Composite request with
// one query subrequest per poll ("Send Multiple Requests Using
// Composite": a query subrequest counts toward its limit of 5 queries or
// collections), so the Discarded and the reprocess polls of an idle org
// cost one call a minute, not two. A poll whose first page is not the
// whole answer (more than 2,000 records changed) is run again on its own,
// following nextRecordsUrl. Each poll then moves its watermark to the
// newest stamp seen when every call of it succeeded, but not past the
// oldest record whose call returned ErrPollAgain. Errors: the call's (an
// *sfapi.Error), each's (but ErrPollAgain), the outbox's; a poll that failed
// keeps its watermark and the next one looks again.
func (w *Writer) pollAll(ctx context.Context, polls []sincePoll) error {
	marks := make([]time.Time, len(polls))
	subs := make([]sfapi.Subrequest, len(polls))
	for i, p := range polls {
		mark, err := w.o.Outbox.Watermark(ctx, p.name)
		if err != nil {
			return err
		}
		marks[i], subs[i] = mark, sfapi.QuerySubrequest(p.name, p.statement(mark))
	}
	res, err := w.o.API.Composite(ctx, subs)
	if err != nil {
		return err
	}
	var errs []error
	for i, p := range polls {
		records, qerr := sfapi.QueryResults(res[i])
		if qerr != nil && sfapi.ClassOf(qerr) == sfapi.Retry && res[i].Status >= 200 && res[i].Status <= 299 {
			records = nil // a page that is not the whole answer: page through it on its own
			qerr = w.o.API.Query(ctx, p.statement(marks[i]), func(r sfapi.Record) error {
				records = append(records, r)
				return nil
			})
		}
		if qerr == nil {
			qerr = w.applyPoll(ctx, p, marks[i], records)
		}
		if qerr != nil {
			errs = append(errs, fmt.Errorf("salesforce: poll %s: %w", p.name, qerr))
		}
	}
	return errors.Join(errs...)
}

// applyPoll calls the poll's each with every record and moves its
// watermark (pollAll).
func (w *Writer) applyPoll(ctx context.Context, p sincePoll, mark time.Time, records []sfapi.Record) error {
	var hold time.Time // the oldest stamp to see again
	newest := mark
	for _, r := range records {
		stamp, err := parseStamp(r["SystemModstamp"])
		if err != nil {
			return fmt.Errorf("SystemModstamp %v: %w", r["SystemModstamp"], err)
		}
		if err := p.each(r, stamp); errors.Is(err, ErrPollAgain) {
			if hold.IsZero() || stamp.Before(hold) {
				hold = stamp
			}
		} else if err != nil {
			return err
		}
		if stamp.After(newest) {
			newest = stamp
		}
	}
	if !hold.IsZero() && newest.After(hold) {
		newest = hold
	}
	if newest.After(mark) {
		return w.o.Outbox.SetWatermark(ctx, p.name, newest)
	}
	return nil
}
