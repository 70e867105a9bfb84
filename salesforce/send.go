package salesforce

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// errNotTried marks a write the round did not send: writes were paused,
// slowed down, or an earlier call of the round stopped it.
var errNotTried = errors.New("salesforce: not tried this round")

// sender makes the round's calls, one at a time, and stops the round at
// the first failure that makes more calls pointless now: the API limit
// (writes pause), an invalid session after its one re-mint and retry, a
// refused token, or a network failure.
type sender struct {
	w *Writer
	// stop is the failure that stopped the round; nil while going on.
	stop error
	// until is when the writes not tried are due again.
	until time.Time
}

func (s *sender) stopped() bool { return s.stop != nil }

// call runs f unless the round has stopped or, while API usage is above
// api_usage_slowdown, the last call was less than slowdown_interval ago;
// it returns errNotTried then. A failure of f that stops the round is
// handled here (pause, log) and returned.
func (s *sender) call(ctx context.Context, f func() error) error {
	if s.stop != nil {
		return errNotTried
	}
	w := s.w
	now := w.o.Now()
	w.mu.Lock()
	next := w.nextCallAt
	w.mu.Unlock()
	if now.Before(next) {
		s.stop, s.until = errNotTried, next
		return errNotTried
	}
	err := f()
	w.noteUsage(now)
	if err == nil {
		return nil
	}
	switch ClassOf(err) {
	case LimitExceeded:
		s.stop, s.until = err, w.pause(ctx)
	case InvalidSession, AuthFailed, Retry:
		s.stop, s.until = err, now.Add(BaseBackoff)
		w.log.Error("Salesforce call failed; its writes wait in the outbox with backoff",
			slog.String("class", string(ClassOf(err))), slog.Any("error", err))
	}
	return err
}

// noteUsage slows writes down to one call per slowdown_interval while the
// org's API usage is at or above api_usage_slowdown of its daily limit
// (Sforce-Limit-Info of the last answer), and logs when that starts and
// ends.
func (w *Writer) noteUsage(now time.Time) {
	ratio := w.o.API.UsageRatio()
	slow := ratio >= w.sf.APIUsageSlowdown
	w.mu.Lock()
	was := w.slowed
	w.slowed = slow
	if slow {
		w.nextCallAt = now.Add(w.sf.SlowdownInterval)
	}
	w.mu.Unlock()
	switch {
	case slow && !was:
		w.log.Warn("Salesforce API usage at or above api_usage_slowdown: writes slowed down",
			slog.Float64("usage", ratio), slog.Duration("interval", w.sf.SlowdownInterval))
	case !slow && was:
		w.log.Info("Salesforce API usage below api_usage_slowdown again: writes at full speed",
			slog.Float64("usage", ratio))
	}
}

// nextCall is the earliest next call while writes are slowed down; the
// zero time when they are not.
func (w *Writer) nextCall() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.slowed {
		return time.Time{}
	}
	return w.nextCallAt
}

// notTried reports whether err means the write was not made (so the entry
// is deferred, not counted as a failed try): not tried this round, or the
// API limit.
func (s *sender) notTried(err error) bool {
	return errors.Is(err, errNotTried) || ClassOf(err) == LimitExceeded
}

// settleErr settles an entry whose write failed with err.
func (w *Writer) settleErr(s *sender, it *item, err error) {
	if s.notTried(err) {
		it.later(s.until)
		return
	}
	w.retry(it, err)
}

// retry settles a failed entry: due again after backoff, or after
// RejectedRetry when Salesforce will not accept it as it is.
func (w *Writer) retry(it *item, err error) {
	now := w.o.Now()
	at := now.Add(w.backoff(it.Tries + 1))
	if ClassOf(err) == Rejected {
		at = now.Add(RejectedRetry)
	}
	msg := err.Error()
	if len(msg) > 500 {
		msg = cleanText(msg, 500)
	}
	it.settle(redisstore.OutboxAck{Verdict: redisstore.VerdictRetry, At: at, Error: msg})
}

// send makes the plan's calls: record upserts and events in collections of
// up to MaxCollection, then the notifications.
func (w *Writer) send(ctx context.Context, p *plan) {
	s := &sender{w: w}
	for chunk := range chunks(p.records) {
		w.sendRecords(ctx, s, chunk)
	}
	for chunk := range chunks(p.events) {
		w.sendEvents(ctx, s, chunk)
	}
	if len(p.notes) > 0 {
		w.sendNotes(ctx, s, p.notes)
	}
}

// chunks yields xs in slices of at most MaxCollection.
func chunks[T any](xs []T) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(xs) > 0 {
			n := min(len(xs), MaxCollection)
			if !yield(xs[:n]) {
				return
			}
			xs = xs[n:]
		}
	}
}

// sendRecords upserts one collection of Failed_Callout__c records and
// settles their entries, record by record.
func (w *Writer) sendRecords(ctx context.Context, s *sender, rws []*recordWrite) {
	records := make([]Record, len(rws))
	for i, rw := range rws {
		records[i] = rw.rec
	}
	var results []error
	err := s.call(ctx, func() error {
		var cerr error
		results, cerr = w.o.API.UpsertCollection(ctx, FailedCalloutObject, ExternalIDField, records)
		return cerr
	})
	for i, rw := range rws {
		rerr := err
		if rerr == nil {
			rerr = results[i]
		}
		for _, it := range rw.items {
			if rerr == nil {
				it.done(rw.root, rw.version, rw.forget)
				continue
			}
			w.settleErr(s, it, rerr)
		}
		if rerr != nil && ClassOf(rerr) == Rejected {
			w.log.Error("Salesforce rejected a Failed_Callout__c record; the dead letter stays in the proxy's "+
				"store and the write is tried again hourly", slog.String("callout_id", rw.root), slog.Any("error", rerr))
		}
	}
}

// sendEvents publishes one collection of Callout_Result__e events.
func (w *Writer) sendEvents(ctx context.Context, s *sender, evs []*eventWrite) {
	records := make([]Record, len(evs))
	for i, ev := range evs {
		records[i] = ev.rec
	}
	var results []error
	err := s.call(ctx, func() error {
		var cerr error
		results, cerr = w.o.API.CreateCollection(ctx, CalloutResultEvent, records)
		return cerr
	})
	for i, ev := range evs {
		rerr := err
		if rerr == nil {
			rerr = results[i]
		}
		if rerr == nil {
			ev.it.done("", 0, false)
			continue
		}
		w.settleErr(s, ev.it, rerr)
		if ClassOf(rerr) == Rejected {
			w.log.Error("Salesforce rejected a Callout_Result__e event; it is tried again hourly",
				slog.String("entry", ev.it.Name), slog.Any("error", rerr))
		}
	}
}
