package salesforce

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// plan is what one round sends: one write per Failed_Callout__c record
// (whatever number of entries asked for it), the events and the
// notifications.
type plan struct {
	records []*recordWrite
	byRoot  map[string]*recordWrite
	events  []*eventWrite
	notes   []*noteWrite
}

// recordWrite is the write of one record and the entries it settles.
type recordWrite struct {
	root string
	// trace is the trace context of the copy a full write was built from
	// ("" for a status-only write: Writer.about looks the root up).
	trace string
	rec   sfapi.Record
	// full: built from a dead-letter copy (all fields); else status only.
	full bool
	// source is when the copy it was built from dead-lettered.
	source time.Time
	// version is the record state's version the write was built from: the
	// entries are fenced on it.
	version int64
	// forget: its status is Expired, the record's last write.
	forget bool
	// status is the transition rec writes to Status__c ("" none: a
	// record created without it shows the picklist default, New, and an
	// update keeps what an admin chose); answered is RecordState.Answered.
	status   string
	answered time.Time
	items    []*item
}

// eventWrite is the completion event of callout id, accepted under the
// trace context trace.
type eventWrite struct {
	id, trace string
	rec       sfapi.Record
	it        *item
}

// prepare turns claimed entries into a plan, settling at once the entries
// that need no call (their callout is gone, a malformed name, a store
// error to retry).
func (w *Writer) prepare(ctx context.Context, items []*item) *plan {
	p := &plan{byRoot: map[string]*recordWrite{}}
	for _, it := range items {
		var err error
		switch {
		case len(it.keys) == 0 || it.keys[0] == "":
			err = errMalformed
		case it.kind == policy.EntryMirror:
			err = w.prepMirror(ctx, p, it, it.keys[0])
		case it.kind == policy.EntryStatus:
			err = w.prepStatus(ctx, p, it, it.keys[0])
		case it.kind == policy.EntryResult:
			err = w.prepResult(ctx, p, it, it.keys[0])
		case it.kind == policy.EntryOutage || it.kind == policy.EntryDisabled:
			err = w.prepNotify(ctx, p, it)
		default:
			err = errMalformed
		}
		switch {
		case errors.Is(err, errMalformed):
			w.log.Error("outbox entry of an unknown kind kept; it is tried again hourly", slog.String("entry", it.Name))
			w.retry(it, &sfapi.Error{Op: "outbox", Class: sfapi.Rejected, Message: "unknown entry"})
		case err != nil:
			w.log.Warn("reading the store for an outbox entry failed; trying again shortly",
				slog.String("entry", it.Name), slog.Any("error", err))
			it.later(w.o.Now().Add(BaseBackoff))
		}
	}
	return p
}

// errMalformed marks an entry this version cannot handle.
var errMalformed = errors.New("malformed outbox entry")

// get reads a callout; (nil, nil) when it is gone.
func (w *Writer) get(ctx context.Context, id string) (*policy.Callout, error) {
	c, err := w.o.Store.Get(ctx, id)
	if errors.Is(err, policy.ErrNotFound) {
		return nil, nil
	}
	return c, err
}

// rootOf returns the root of c's record: c itself, or for a replay chain
// the first dead letter it replays, following ReplayOf (through the links
// SetRecordStatus kept, or the records while they exist; at most 8 hops).
func (w *Writer) rootOf(ctx context.Context, c *policy.Callout) (string, error) {
	id, parent := c.ID, c.ReplayOf
	for hops := 0; parent != "" && hops < 8; hops++ {
		root, err := w.o.Outbox.RootOf(ctx, parent)
		if err != nil || root != "" {
			return root, err
		}
		p, err := w.get(ctx, parent)
		if err != nil {
			return "", err
		}
		if p == nil {
			return parent, nil
		}
		id, parent = p.ID, p.ReplayOf
	}
	return id, nil
}

// rootOfID is rootOf for an id; an id whose record is gone is its own
// root unless a link says otherwise.
func (w *Writer) rootOfID(ctx context.Context, id string) (string, error) {
	if root, err := w.o.Outbox.RootOf(ctx, id); err != nil || root != "" {
		return root, err
	}
	c, err := w.get(ctx, id)
	if err != nil || c == nil {
		return id, err
	}
	return w.rootOf(ctx, c)
}

// prepMirror: m:{id}, a dead letter to mirror. A replay chain's dead
// letter writes its root's record, marked Failed Again with the chain's
// attempts; a copy older than what the record shows writes the status
// only.
func (w *Writer) prepMirror(ctx context.Context, p *plan, it *item, id string) error {
	c, err := w.getOrDrop(ctx, it, id, "dead letter gone before it was mirrored to Salesforce")
	if c == nil {
		return err
	}
	root, err := w.rootOf(ctx, c)
	if err != nil {
		return err
	}
	current := true
	if root != id {
		current, err = w.o.Outbox.SetRecordStatus(ctx, root, policy.StatusChange{
			Status: policy.RecordFailedAgain, Replay: id, Copy: id, At: c.FinishedAt})
		if err != nil {
			return err
		}
	}
	st, err := w.o.Outbox.RecordState(ctx, root)
	if err != nil {
		return err
	}
	status := ownStatus(st.Status)
	if !current {
		w.addStatus(p, it, root, st)
		return nil
	}
	rec := FailedCallout(root, c, status, st.Replay, w.rulesOf(c.Endpoint), w.o.DeadLetterRetention)
	p.addRecord(&recordWrite{root: root, trace: c.TraceContext, rec: rec, full: true, source: c.FinishedAt,
		version: st.Version, status: status, answered: st.Answered}, it)
	return nil
}

// ownStatus is the status a write carries to Status__c: a transition of
// the proxy's own (Transitions), else "" (none).
func ownStatus(status string) string {
	if slices.Contains(Transitions, status) {
		return status
	}
	return ""
}

// addStatus adds the status-only write of root's state: its transition
// and latest replay chain. A state with neither needs no write: the entry
// is settled at once, fenced on the state's version.
func (w *Writer) addStatus(p *plan, it *item, root string, st policy.RecordState) {
	status := ownStatus(st.Status)
	forget := st.Status == policy.RecordExpired
	if status == "" && st.Replay == "" {
		it.done(root, st.Version, forget)
		return
	}
	p.addRecord(&recordWrite{root: root, rec: StatusOnly(root, status, st.Replay), version: st.Version,
		forget: forget, status: status, answered: st.Answered}, it)
}

// prepStatus: s:{root}, the record's status as its state says.
func (w *Writer) prepStatus(ctx context.Context, p *plan, it *item, root string) error {
	st, err := w.o.Outbox.RecordState(ctx, root)
	if err != nil {
		return err
	}
	if st.Version == 0 || st.Status == "" {
		it.done("", 0, false) // the state is gone: its copies expired and it was cleaned up
		return nil
	}
	w.addStatus(p, it, root, st)
	return nil
}

// addRecord adds a record write, merging with the round's other write of
// the same root: a full write wins over a status-only one, and of two full
// writes the one from the later dead letter; the entries of both are
// settled by the one sent.
func (p *plan) addRecord(rw *recordWrite, it *item) {
	cur := p.byRoot[rw.root]
	if cur == nil {
		rw.items = []*item{it}
		p.byRoot[rw.root] = rw
		p.records = append(p.records, rw)
		return
	}
	cur.items = append(cur.items, it)
	if rw.full && (!cur.full || rw.source.After(cur.source)) || !cur.full && !rw.full && rw.version > cur.version {
		cur.rec, cur.full, cur.source, cur.version, cur.forget = rw.rec, rw.full, rw.source, rw.version, rw.forget
		cur.trace = cmp.Or(rw.trace, cur.trace)
		cur.status, cur.answered = rw.status, rw.answered
	}
}

// prepResult: e:{id}, a scheduled callout's completion event. A replay
// chain that succeeded also marks its root's record Reprocessed.
func (w *Writer) prepResult(ctx context.Context, p *plan, it *item, id string) error {
	c, err := w.getOrDrop(ctx, it, id, "callout gone before its completion event was published")
	if c == nil {
		return err
	}
	if c.ReplayOf != "" && c.State == policy.Succeeded {
		root, err := w.rootOf(ctx, c)
		if err != nil {
			return err
		}
		if _, err := w.o.Outbox.SetRecordStatus(ctx, root, policy.StatusChange{
			Status: policy.RecordReprocessed, Replay: id, At: c.FinishedAt, Write: true}); err != nil {
			return err
		}
	}
	if !w.publishes(c) {
		it.done("", 0, false) // completion_events leaves this ending out
		return nil
	}
	p.events = append(p.events, &eventWrite{id: c.ID, trace: c.TraceContext, rec: ResultEvent(c, w.rulesOf(c.Endpoint)),
		it: it})
	return nil
}

// getOrDrop returns callout id, the record entry it writes from. When the
// record is gone it settles it as dropped (gone says why) and returns nil,
// nil; on a store error, nil and the error.
func (w *Writer) getOrDrop(ctx context.Context, it *item, id, gone string) (*policy.Callout, error) {
	c, err := w.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if c == nil {
		w.dropped(it, id, gone)
	}
	return c, nil
}

// dropped settles an entry whose callout record is gone (discarded, or
// expired although KeepPending keeps the records of queued writes: the
// proxy was down longer than the record's TTL, or the write waited past
// KeepCap), logged as an error and counted in
// callout_salesforce_writes_dropped_total{kind}.
func (w *Writer) dropped(it *item, id, msg string) {
	w.log.Error(msg+"; the write is dropped", slog.String("callout_id", id), slog.String("entry", it.Name))
	if w.o.Metrics != nil {
		w.o.Metrics.WritesDropped.WithLabelValues(it.kind).Inc()
	}
	it.done("", 0, false)
}

// publishes reports whether the ending of scheduled callout c publishes a
// Callout_Result__e (endpoints.*.completion_events, contract §8): "all" every
// ending, "dead_letters" dead letters only, "none" none; unset, "all" for
// a callout that carries a Callout-Source-Record (Apex waits on that
// record) and "dead_letters" for one that does not — an org's hourly
// event allocation is far below the proxy's rate (docs/salesforce.md).
func (w *Writer) publishes(c *policy.Callout) bool {
	mode := w.endpoint(c.Endpoint).CompletionEvents
	if mode == "" {
		mode = config.CompletionEventsDeadLetters
		if c.SourceRecord != "" {
			mode = config.CompletionEventsAll
		}
	}
	switch mode {
	case config.CompletionEventsAll:
		return true
	case config.CompletionEventsDeadLetters:
		return c.State == policy.DeadLettered
	}
	return false
}
