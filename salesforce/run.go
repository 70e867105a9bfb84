package salesforce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// Background timing of Run.
const (
	// ExpirySweepEvery is how often each replica checks dead-letter copies
	// whose expiry time has come.
	ExpirySweepEvery = 30 * time.Second
	// GaugeEvery is how often the outbox gauge is refreshed.
	GaugeEvery = 15 * time.Second
	// PollOverlap is how far before its watermark a poll looks again:
	// SystemModstamp is set when a transaction starts, so a record can
	// commit with a stamp older than one already seen.
	PollOverlap = 5 * time.Minute
	// discardedPoll names the Discarded poll's lock and watermark.
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
// ExpirySweepEvery, and — in one replica at a time — the poll of Discarded
// records every poll_interval.
func (w *Writer) Run(ctx context.Context) {
	var swept, gauged, polled time.Time
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
		if now.Sub(gauged) >= GaugeEvery {
			gauged = now
			w.gauge(ctx)
		}
		if now.Sub(polled) >= w.sf.PollInterval {
			polled = now
			w.pollDiscardedLocked(ctx)
		}
		if wait <= 0 {
			continue // more is due
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-w.wake:
			t.Stop()
		}
	}
}

// gauge sets the outbox and API-usage gauges.
func (w *Writer) gauge(ctx context.Context) {
	if w.o.Metrics == nil {
		return
	}
	w.o.Metrics.APIUsage.Set(w.o.API.UsageRatio())
	w.mu.Lock()
	why := w.pauseWhy
	ended := why != "" && !w.pausedTill.After(w.o.Now())
	if ended {
		w.pauseWhy = "" // the pause ended: writes resumed by themselves
	}
	w.mu.Unlock()
	if ended {
		w.o.Metrics.WritesPaused.WithLabelValues(why).Set(0)
	}
	if n, err := w.o.Outbox.Len(ctx); err == nil {
		w.o.Metrics.OutboxItems.Set(float64(n))
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

// pollDiscardedLocked runs PollDiscarded when this replica holds the poll
// lock (one replica at a time).
func (w *Writer) pollDiscardedLocked(ctx context.Context) {
	held, err := w.o.Store.TryLock(ctx, "sf-poll-"+discardedPoll, w.o.Owner, 2*w.sf.PollInterval)
	if err != nil || !held {
		return
	}
	if n, err := w.PollDiscarded(ctx); err != nil {
		w.log.Warn("polling Discarded Failed_Callout__c records failed", slog.Any("error", err))
	} else if n > 0 {
		w.log.Info("deleted the proxy's copies of Discarded records", slog.Int("records", n))
	}
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
	err := w.PollSince(ctx, discardedPoll, FailedCalloutObject, []string{ExternalIDField, "Replay_Callout_Id__c"},
		"Status__c = "+QuoteSOQL(policy.RecordDiscarded), func(r Record, stamp time.Time) error {
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
			n++
			_, err := w.o.Outbox.SetRecordStatus(ctx, id, redisstore.StatusChange{Status: policy.RecordDiscarded, At: stamp})
			if errors.Is(err, policy.ErrNotFound) {
				return nil // not an id of ours
			}
			return err
		})
	return n, err
}

// discard deletes one copy; one already gone or not a dead letter (a
// replay chain still running or succeeded) is left as it is.
func (w *Writer) discard(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	err := w.o.Store.Discard(ctx, id)
	switch {
	case err == nil:
		w.log.Info("dead letter discarded by a Salesforce admin", slog.String("callout_id", id))
		return nil
	case errors.Is(err, policy.ErrNotFound), errors.Is(err, policy.ErrNotDeadLettered):
		return nil
	}
	return err
}

// ErrPollAgain is what a PollSince callback returns (alone or wrapped) for
// a record it cannot handle now but should see again: the poll goes on
// with the next records, and its watermark stops at that record's stamp.
var ErrPollAgain = errors.New("salesforce: poll this record again")

// PollSince runs a watermark poll named name: it selects fields (and
// SystemModstamp) of object's records matching where (a SOQL condition)
// changed since the poll's watermark minus PollOverlap, oldest first,
// following nextRecordsUrl, and calls each with every record and its
// SystemModstamp. When every call succeeded it moves the watermark to the
// newest stamp seen; not past the oldest record whose call returned
// ErrPollAgain. The Discarded and reprocess polls use it. Errors: the
// query's (an *Error), each's (but ErrPollAgain), the outbox's.
func (w *Writer) PollSince(ctx context.Context, name, object string, fields []string, where string,
	each func(r Record, stamp time.Time) error) error {
	mark, err := w.o.Outbox.Watermark(ctx, name)
	if err != nil {
		return err
	}
	var hold time.Time // the oldest stamp to see again
	stmt := fmt.Sprintf("SELECT %s, SystemModstamp FROM %s WHERE %s", strings.Join(fields, ", "), object, where)
	if !mark.IsZero() {
		stmt += " AND SystemModstamp >= " + mark.Add(-PollOverlap).UTC().Format(time.RFC3339)
	}
	stmt += " ORDER BY SystemModstamp ASC"
	newest := mark
	err = w.o.API.Query(ctx, stmt, func(r Record) error {
		stamp, perr := parseStamp(r["SystemModstamp"])
		if perr != nil {
			return fmt.Errorf("salesforce: poll %s: SystemModstamp %v: %w", name, r["SystemModstamp"], perr)
		}
		if err := each(r, stamp); errors.Is(err, ErrPollAgain) {
			if hold.IsZero() || stamp.Before(hold) {
				hold = stamp
			}
		} else if err != nil {
			return err
		}
		if stamp.After(newest) {
			newest = stamp
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !hold.IsZero() && newest.After(hold) {
		newest = hold
	}
	if newest.After(mark) {
		return w.o.Outbox.SetWatermark(ctx, name, newest)
	}
	return nil
}
