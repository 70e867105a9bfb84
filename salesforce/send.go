package salesforce

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// errNotTried marks a write the round did not send: writes were paused,
// slowed down or deferred, or an earlier call of the round stopped it.
var errNotTried = errors.New("salesforce: not tried this round")

// sender makes the round's calls, one at a time, and stops the round at
// the first failure that makes more calls pointless now: an API limit, an
// invalid session after its one re-mint and retry, a refused token, or a
// network or server failure. Such a failure defers every write — the whole
// batch, and what is queued behind it — to one time, shared by every
// replica (Outbox.Defer).
type sender struct {
	w *Writer
	// defs are the deferrals in force when the round began.
	defs map[string]policy.Deferral
	// stop is the failure that stopped the round; nil while going on.
	stop error
	// until is when the writes not tried are due again.
	until time.Time
	// calls counts the API calls made; overflow the entries left for the
	// next batch.
	calls, overflow int
	// recordIDs are the Failed_Callout__c record Ids this round's upserts
	// answered, by root (notetarget.go: where a notification leads).
	recordIDs map[string]string
}

func (s *sender) stopped() bool { return s.stop != nil }

// call runs f unless the round has stopped or, while API usage is above
// api_usage_slowdown, the last call was less than slowdown_interval ago;
// it returns errNotTried then. A failure of f that stops the round is
// handled here (pause or deferral, log) and returned; a success ends a
// deferral of every write.
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
	s.calls++
	w.noteUsage(now)
	if err == nil {
		w.refusalEnded()
		if s.defs[""].Fails > 0 {
			if cerr := w.o.Outbox.ClearDeferral(ctx, ""); cerr != nil {
				w.log.Warn("ending the deferral of Salesforce writes failed", slog.Any("error", cerr))
			}
			delete(s.defs, "")
		}
		return nil
	}
	switch class := sfapi.ClassOf(err); class {
	case sfapi.LimitExceeded:
		s.stop, s.until = err, w.pause(ctx, pauseAPILimit)
	case sfapi.StorageFull:
		s.stop, s.until = err, w.pause(ctx, pauseStorage)
	case sfapi.ConcurrentLimit, sfapi.InvalidSession, sfapi.AuthFailed, sfapi.Retry, sfapi.Maintenance:
		s.stop, s.until = err, w.deferWrites(ctx, "", class, now)
		if w.refusalStarted(class) {
			w.log.Error("Salesforce call failed; its batch and the writes behind it wait in the outbox "+
				"(logged once until a call succeeds or the failure changes; callout_salesforce_requests_total "+
				"counts each by result)", slog.String("class", string(class)), slog.Time("until", s.until),
				slog.Any("error", err))
		}
	case sfapi.Rejected:
		// A whole call refused as it is (a JSON 4xx: a resource or version the
		// org does not have): its writes back off towards RejectedCeiling
		// (settleErr), counted and logged once until a call succeeds.
		w.countWriteError(err)
		if w.refusalStarted(class) {
			w.log.Error("Salesforce refused a whole call as it is; its writes stay in the outbox and are tried "+
				"again, backing off to a day (logged once until a call succeeds)", slog.Any("error", err))
		}
	}
	return err
}

// refusalStarted notes a failed call of class and reports whether it is
// the first of its kind since the last call that succeeded (the one to
// log: an outage or a maintenance window logs one line, not one a call).
func (w *Writer) refusalStarted(class sfapi.Class) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := w.refusing != class
	w.refusing = class
	return first
}

// refusalEnded notes a call that succeeded, and logs the end of the
// failure it ends.
func (w *Writer) refusalEnded() {
	w.mu.Lock()
	was := w.refusing
	w.refusing = ""
	w.mu.Unlock()
	if was != "" {
		w.log.Info("Salesforce calls succeed again", slog.String("after", string(was)))
	}
}

// deferWrites defers the writes of scope ("" every write, or an sObject's)
// after a failed call of class: after a concurrent-requests limit briefly
// (concurrentBackoff), after a rejection towards RejectedCeiling, else
// with backoff. It returns when they may be tried again; a deferral that
// cannot be stored still holds this round's writes until then.
func (w *Writer) deferWrites(ctx context.Context, scope string, class sfapi.Class, now time.Time) time.Time {
	var d policy.Deferral
	var err error
	if class == sfapi.AuthFailed {
		// The token layer holds mints back on its own backoff (no request,
		// no API call, while it lasts), so the writes try again soon, and a
		// refused mint is not counted: the first token that works meets the
		// backoff of the calls before the refusals, not one grown by them.
		d, err = w.o.Outbox.Hold(ctx, scope, now.Add(BaseBackoff))
	} else {
		d, err = w.o.Outbox.Defer(ctx, scope, func(fails int) time.Time {
			switch class {
			case sfapi.ConcurrentLimit:
				return now.Add(concurrentBackoff(fails))
			case sfapi.Rejected:
				return now.Add(rejectedBackoff(fails))
			}
			return now.Add(w.backoff(fails))
		})
	}
	if err != nil {
		w.log.Warn("storing the deferral of Salesforce writes failed; entries still wait until it ends",
			slog.Any("error", err))
	}
	return d.Until
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
// is deferred, not counted as a failed try): not tried this round, the
// daily API limit, or the org's storage full.
func (s *sender) notTried(err error) bool {
	c := sfapi.ClassOf(err)
	return errors.Is(err, errNotTried) || c == sfapi.LimitExceeded || c == sfapi.StorageFull
}

// settleErr settles an entry whose write failed with err: deferred when it
// was not tried; with the whole batch to the round's one time when the
// call failed; else on its own (retry).
func (w *Writer) settleErr(s *sender, it *item, err error) {
	switch {
	case s.notTried(err):
		it.later(s.until)
	case s.stop != nil && errors.Is(s.stop, err) && !s.until.IsZero():
		w.retryAt(it, err, s.until)
	default:
		w.retry(it, err)
	}
}

// retry settles an entry that failed on its own: due again after backoff,
// or after rejectedBackoff when Salesforce will not accept it as it is.
func (w *Writer) retry(it *item, err error) {
	now := w.o.Now()
	at := now.Add(w.backoff(it.Tries + 1))
	if sfapi.ClassOf(err) == sfapi.Rejected {
		at = now.Add(rejectedBackoff(it.Tries + 1))
	}
	w.retryAt(it, err, at)
}

// retryAt settles a failed entry, due again at at.
func (w *Writer) retryAt(it *item, err error, at time.Time) {
	msg := err.Error()
	if len(msg) > 500 {
		msg = cleanText(msg, 500)
	}
	it.settle(policy.OutboxAck{Verdict: policy.VerdictRetry, At: at, Error: msg})
}

// send makes the plan's calls: the record upserts and events that fit in
// one Composite request (after the guard of Status__c, when the batch
// writes statuses), then the owner notifications in one action call.
func (w *Writer) send(ctx context.Context, s *sender, p *plan) {
	b := w.pack(s, p)
	if len(b.groups) > 0 {
		if err := w.guard(ctx, s, b); err != nil {
			b.fail(w, s, err)
		} else if b.build(); len(b.subs) > 0 {
			w.sendBatch(ctx, s, b)
		}
	}
	if len(p.notes) > 0 {
		w.sendNotes(ctx, s, p.notes)
	}
}
