package salesforce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// IntegrationPermissionSet is the permission set of apex-stubs/ that gives
// the integration user access to every object and field the proxy writes.
const IntegrationPermissionSet = "Callout_Proxy_Integration"

// compositeOverhead is what a Composite body holds besides the records:
// the envelope, each subrequest's method, url and reference (bytes).
const compositeOverhead = 2048

// batch is what one Composite request carries: collections of record
// upserts and of event publishes, and the writes each settles.
type batch struct {
	subs   []sfapi.Subrequest
	groups []*group
}

// group is one sObject Collections subrequest's writes.
type group struct {
	object  string
	records []*recordWrite
	events  []*eventWrite
}

func (g *group) size() int { return len(g.records) + len(g.events) }

// items returns the entries g settles.
func (g *group) items() []*item {
	var out []*item
	for _, rw := range g.records {
		out = append(out, rw.items...)
	}
	for _, ev := range g.events {
		out = append(out, ev.it)
	}
	return out
}

// fail settles every entry of the batch after err (nothing was written).
func (b *batch) fail(w *Writer, s *sender, err error) {
	for _, g := range b.groups {
		for _, it := range g.items() {
			w.settleErr(s, it, err)
		}
	}
}

// recordSize is the JSON size of one record in a collection (bytes).
func recordSize(r sfapi.Record) int {
	b, err := json.Marshal(r)
	if err != nil {
		return compositeOverhead
	}
	return len(b) + 48 // "attributes":{"type":…} and the comma
}

// pack chooses what one Composite request carries — the records first,
// then the events, in collections of up to sfapi.MaxCollection, at most
// sfapi.MaxCollections of them and within salesforce.batch_max_bytes (a record
// larger than that goes alone) — and defers the rest: to the next batch
// at once (overflow), or, for an sObject whose writes are deferred after
// a failed call, to the deferral's end.
func (w *Writer) pack(s *sender, p *plan) *batch {
	now := w.o.Now()
	budget := w.sf.BatchMaxBytes - compositeOverhead
	used := 0
	b := &batch{}
	var cur *group
	place := func(object string, size int) *group {
		if used > 0 && used+size > budget {
			return nil
		}
		if cur == nil || cur.object != object || cur.size() >= sfapi.MaxCollection {
			if len(b.groups) >= sfapi.MaxCollections {
				return nil
			}
			cur = &group{object: object}
			b.groups = append(b.groups, cur)
		}
		used += size
		return cur
	}
	overflow := func(items []*item) {
		for _, it := range items {
			it.later(now)
			s.overflow++
		}
	}
	if d := s.defs[FailedCalloutObject]; d.Until.After(now) {
		for _, rw := range p.records {
			for _, it := range rw.items {
				it.later(d.Until)
			}
		}
	} else {
		for _, rw := range p.records {
			if g := place(FailedCalloutObject, recordSize(rw.rec)); g != nil {
				g.records = append(g.records, rw)
			} else {
				overflow(rw.items)
			}
		}
	}
	if d := s.defs[CalloutResultEvent]; d.Until.After(now) {
		for _, ev := range p.events {
			ev.it.later(d.Until)
		}
	} else {
		for _, ev := range p.events {
			if g := place(CalloutResultEvent, recordSize(ev.rec)); g != nil {
				g.events = append(g.events, ev)
			} else {
				overflow([]*item{ev.it})
			}
		}
	}
	return b
}

// build makes the batch's subrequests from its groups (after guard: the
// collections copy the records).
func (b *batch) build() {
	b.subs = b.subs[:0]
	for i, g := range b.groups {
		ref := fmt.Sprintf("c%d", i)
		if g.object == FailedCalloutObject {
			recs := make([]sfapi.Record, len(g.records))
			for j, rw := range g.records {
				recs[j] = rw.rec
			}
			b.subs = append(b.subs, sfapi.UpsertSubrequest(ref, FailedCalloutObject, ExternalIDField, recs))
			continue
		}
		recs := make([]sfapi.Record, len(g.events))
		for j, ev := range g.events {
			recs[j] = ev.rec
		}
		b.subs = append(b.subs, sfapi.CreateSubrequest(ref, CalloutResultEvent, recs))
	}
}

// guard keeps an admin's choice on Status__c (contract §8: Status__c belongs
// to the admin after the first write). The proxy writes Status__c only on
// its own transitions (Transitions; a record is created without it and
// takes the picklist's default, New), and not even those over a
// Reprocess Requested or Discarded an admin set since the last poll:
// before a batch that writes statuses, one Composite request of queries
// reads the records that show an admin's choice, and their writes leave
// Status__c out — Discarded always, Reprocess Requested unless the status
// answers that very request (RecordState.Answered is at or after its
// SystemModstamp). The next poll then handles the choice. Errors: the
// call's (the batch is then not sent).
func (w *Writer) guard(ctx context.Context, s *sender, b *batch) error {
	var guarded []*recordWrite
	for _, g := range b.groups {
		for _, rw := range g.records {
			if _, ok := rw.rec["Status__c"]; ok {
				guarded = append(guarded, rw)
			}
		}
	}
	if len(guarded) == 0 {
		return nil
	}
	var subs []sfapi.Subrequest
	for i := 0; i < len(guarded); i += sfapi.MaxCollection {
		ids := make([]string, 0, sfapi.MaxCollection)
		for _, rw := range guarded[i:min(i+sfapi.MaxCollection, len(guarded))] {
			ids = append(ids, sfapi.QuoteSOQL(rw.root))
		}
		subs = append(subs, sfapi.QuerySubrequest(fmt.Sprintf("q%d", len(subs)), "SELECT "+ExternalIDField+
			", Status__c, SystemModstamp FROM "+FailedCalloutObject+" WHERE "+ExternalIDField+" IN ("+
			strings.Join(ids, ", ")+") AND Status__c IN ("+sfapi.QuoteSOQL(policy.RecordReprocessRequested)+", "+
			sfapi.QuoteSOQL(policy.RecordDiscarded)+")"))
	}
	var res []sfapi.SubResult
	if err := s.call(ctx, func() error {
		var err error
		res, err = w.o.API.Composite(ctx, subs)
		return err
	}); err != nil {
		return err
	}
	type shown struct {
		status string
		stamp  time.Time
	}
	current := map[string]shown{}
	for _, r := range res {
		recs, err := sfapi.QueryResults(r)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			id, _ := rec[ExternalIDField].(string)
			st, _ := rec["Status__c"].(string)
			stamp, _ := parseStamp(rec["SystemModstamp"])
			current[id] = shown{st, stamp}
		}
	}
	for _, rw := range guarded {
		c, ok := current[rw.root]
		if !ok || c.status == policy.RecordReprocessRequested && !c.stamp.After(rw.answered) {
			continue
		}
		delete(rw.rec, "Status__c")
		w.log.InfoContext(w.about(ctx, rw.root, rw.trace), "Status__c left as an admin set it since the last poll; "+
			"the poll handles it", slog.String("callout_id", rw.root), slog.String("status", c.status), slog.String("not_written", rw.status))
	}
	b.dropEmpty()
	return nil
}

// dropEmpty settles, without a write, the record writes the guard left
// with nothing but the external id (a status-only write whose status an
// admin's choice kept out): writing them would only move the record's
// SystemModstamp under the admin's request.
func (b *batch) dropEmpty() {
	groups := b.groups[:0]
	for _, g := range b.groups {
		kept := g.records[:0]
		for _, rw := range g.records {
			if len(rw.rec) == 1 {
				for _, it := range rw.items {
					it.done(rw.root, rw.version, rw.forget)
				}
				continue
			}
			kept = append(kept, rw)
		}
		g.records = kept
		if g.size() > 0 {
			groups = append(groups, g)
		}
	}
	b.groups = groups
}

// parseStamp reads a Salesforce dateTime (2024-05-01T10:00:00.000+0000).
func parseStamp(v any) (time.Time, error) {
	s, _ := v.(string)
	return time.Parse(time.RFC3339Nano, strings.Replace(s, "+0000", "Z", 1))
}

// sendBatch sends the batch's Composite request and settles its entries,
// collection by collection, record by record.
func (w *Writer) sendBatch(ctx context.Context, s *sender, b *batch) {
	var res []sfapi.SubResult
	if err := s.call(ctx, func() error {
		var err error
		res, err = w.o.API.Composite(ctx, b.subs)
		return err
	}); err != nil {
		b.fail(w, s, err)
		return
	}
	for i, g := range b.groups {
		op := "upsert " + FailedCalloutObject
		if g.object == CalloutResultEvent {
			op = "create " + CalloutResultEvent
		}
		errs, err := sfapi.CollectionResults(op, res[i], g.size())
		if err != nil {
			w.groupFailed(ctx, s, g, err)
			continue
		}
		if s.defs[g.object].Fails > 0 {
			if err := w.o.Outbox.ClearDeferral(ctx, g.object); err != nil {
				w.log.Warn("ending a deferral of Salesforce writes failed", slog.Any("error", err))
			}
		}
		w.storageFull(ctx, s, errs)
		ids := sfapi.CollectionIDs(res[i], g.size())
		for j, rw := range g.records {
			w.settleRecord(ctx, s, rw, errs[j])
			s.noteRecordID(rw.root, ids[j])
		}
		for j, ev := range g.events {
			w.settleEvent(ctx, s, ev, errs[len(g.records)+j])
		}
	}
}

// storageFull pauses every write when a record of a collection was refused
// with STORAGE_LIMIT_EXCEEDED: the org can save no record, so the outbox
// waits as a whole (StoragePause) and the round stops; the refused entries
// are then settled as not tried (sender.notTried), not as failed tries.
func (w *Writer) storageFull(ctx context.Context, s *sender, errs []error) {
	if s.stop != nil {
		return
	}
	for _, err := range errs {
		if err != nil && sfapi.ClassOf(err) == sfapi.StorageFull {
			s.stop, s.until = err, w.pause(ctx, pauseStorage)
			return
		}
	}
}

// settleRecord settles the entries of one record write after its result.
func (w *Writer) settleRecord(ctx context.Context, s *sender, rw *recordWrite, err error) {
	for _, it := range rw.items {
		if err == nil {
			it.done(rw.root, rw.version, rw.forget)
			continue
		}
		w.settleErr(s, it, err)
	}
	w.recordRefused(err)
	if err != nil && sfapi.ClassOf(err) == sfapi.Rejected {
		w.countWriteError(err)
		w.log.ErrorContext(w.about(ctx, rw.root, rw.trace), "Salesforce rejected a Failed_Callout__c record; "+
			"the dead letter stays in the proxy's store and the write is tried again, backing off to a day",
			slog.String("callout_id", rw.root), slog.Any("error", err))
	}
}

// settleEvent settles one event's entry after its result.
func (w *Writer) settleEvent(ctx context.Context, s *sender, ev *eventWrite, err error) {
	if err == nil {
		ev.it.done("", 0, false)
		return
	}
	w.settleErr(s, ev.it, err)
	w.recordRefused(err)
	if sfapi.ClassOf(err) == sfapi.Rejected {
		w.countWriteError(err)
		w.log.ErrorContext(w.about(ctx, ev.id, ev.trace), "Salesforce rejected a Callout_Result__e event; it is "+
			"tried again, backing off to a day", slog.String("callout_id", ev.id), slog.String("entry", ev.it.Name),
			slog.Any("error", err))
	}
}

// recordRefused counts a record or event Salesforce refused for now — a
// lock or another retryable code (sfapi.Retry: it backs off on its own), or
// read-only maintenance (sfapi.Maintenance: the outage backoff) — in
// callout_salesforce_write_errors_total{code}, and logs the first of each
// class until a record is saved again (then the end too). Rejections are
// logged and counted where they are settled.
func (w *Writer) recordRefused(err error) {
	class := sfapi.ClassOf(err)
	if err != nil && class != sfapi.Maintenance && class != sfapi.Retry {
		return
	}
	w.mu.Lock()
	first := err != nil && !w.refusedRecords[class]
	ended := err == nil && len(w.refusedRecords) > 0
	if err != nil {
		w.refusedRecords[class] = true
	} else {
		clear(w.refusedRecords)
	}
	w.mu.Unlock()
	switch {
	case first && class == sfapi.Maintenance:
		w.log.Warn("Salesforce is in read-only maintenance: its records are refused and tried again on the "+
			"outage backoff (logged once until a record is saved)", slog.Any("error", err))
	case first:
		w.log.Warn("Salesforce refused records for now (a lock, a rolled-back batch); each is tried again with "+
			"backoff (logged once until a record is saved)", slog.Any("error", err))
	case ended:
		w.log.Info("Salesforce saves records again")
	}
	if err != nil {
		w.countWriteError(err)
	}
}

// groupFailed settles a collection Salesforce refused as a whole: every
// entry of it, and every later write of its sObject, waits to one time —
// after a rejection (a field or object the integration user cannot see:
// INVALID_FIELD, INVALID_TYPE) backing off towards RejectedCeiling, with
// one clear error naming the field and the permission set to fix.
func (w *Writer) groupFailed(ctx context.Context, s *sender, g *group, err error) {
	now := w.o.Now()
	class := sfapi.ClassOf(err)
	var until time.Time
	if class == sfapi.LimitExceeded || class == sfapi.StorageFull {
		why := pauseAPILimit
		if class == sfapi.StorageFull {
			why = pauseStorage
		}
		until = w.pause(ctx, why)
		s.stop, s.until = err, until
		for _, it := range g.items() {
			it.later(until)
		}
		return
	}
	until = w.deferWrites(ctx, g.object, class, now)
	for _, it := range g.items() {
		w.retryAt(it, err, until)
	}
	if class != sfapi.Rejected {
		w.log.Warn("Salesforce failed a collection; its writes wait in the outbox", slog.String("object", g.object),
			slog.Time("until", until), slog.Any("error", err))
		return
	}
	w.countWriteError(err)
	var e *sfapi.Error
	errors.As(err, &e)
	field := fieldOf(e)
	w.log.Error(fmt.Sprintf("Salesforce refuses every %s write (%s%s): the integration user cannot see or edit it. "+
		"Assign it the permission set %s (apex-stubs/force-app/main/default/permissionsets/), which grants %s "+
		"and its fields, or deploy the missing field. The writes stay in the proxy's outbox and are tried again, "+
		"backing off to %s.", g.object, e.Code, inField(field), IntegrationPermissionSet, g.object, RejectedCeiling),
		slog.String("code", e.Code), slog.String("object", g.object), slog.String("field", field),
		slog.String("permission_set", IntegrationPermissionSet), slog.Int("writes", g.size()),
		slog.Time("until", until), slog.Any("error", err))
}

// quotedName finds the first '…' name in a Salesforce message ("No such
// column 'X__c' on sobject of type Y").
var quotedName = regexp.MustCompile(`'([A-Za-z0-9_]+)'`)

// fieldOf names the field (or object) a refusal is about: its fields, or
// the name its message quotes.
func fieldOf(e *sfapi.Error) string {
	if e == nil {
		return ""
	}
	if len(e.Fields) > 0 {
		return e.Fields[0]
	}
	if m := quotedName.FindStringSubmatch(e.Message); m != nil {
		return m[1]
	}
	return ""
}

func inField(field string) string {
	if field == "" {
		return ""
	}
	return " on " + field
}

// countWriteError counts a refused write by its error code
// (callout_salesforce_write_errors_total{code}).
func (w *Writer) countWriteError(err error) {
	if w.o.Metrics == nil {
		return
	}
	code := "UNKNOWN_ERROR"
	var e *sfapi.Error
	if errors.As(err, &e) && e.Code != "" {
		code = e.Code
	}
	w.o.Metrics.WriteErrors.WithLabelValues(code).Inc()
}
