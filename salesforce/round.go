package salesforce

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// item is one claimed outbox entry and how it will be settled.
type item struct {
	policy.OutboxEntry
	kind string
	keys []string
	ack  policy.OutboxAck
	set  bool
}

func (it *item) settle(a policy.OutboxAck) {
	a.Name = it.Name
	it.ack, it.set = a, true
}

// done settles a written entry; root and version fence a record write.
func (it *item) done(root string, version int64, forget bool) {
	it.settle(policy.OutboxAck{Verdict: policy.VerdictDone, Root: root, Version: version, Forget: forget})
}

// later settles an entry that was not tried, due again at at.
func (it *item) later(at time.Time) {
	it.settle(policy.OutboxAck{Verdict: policy.VerdictDefer, At: at})
}

// Report is what one Round did.
type Report struct {
	// Claimed entries, and how they were settled.
	Claimed, Done, Retried, Deferred int
	// Overflow counts the deferred entries that did not fit in this
	// round's Composite request (sfapi.MaxCollections collections, the bytes of
	// salesforce.batch_max_bytes): due again at once.
	Overflow int
	// Calls is the Salesforce API calls the round made (token requests
	// are not API calls).
	Calls int
	// Busy: another replica holds the flush lease; nothing was claimed.
	Busy bool
}

// Round writes one batch: it takes the flush lease (one replica writes a
// batch at a time), claims up to PerRound due entries across the shards'
// outboxes, writes them to Salesforce — the record upserts and the
// Callout_Result__e events in one Composite request, the owner
// notifications in one action call — and settles each entry: done, retried
// or deferred. It writes nothing while writes are paused
// (REQUEST_LIMIT_EXCEEDED) or deferred after a failed call. Tick decides
// when a batch is due and calls it; tests call it directly. Errors: only
// the outbox's (Redis unavailable); Salesforce failures are settled on the
// entries and logged.
func (w *Writer) Round(ctx context.Context) (Report, error) {
	if paused, err := w.paused(ctx); paused || err != nil {
		return Report{}, err
	}
	defs, err := w.o.Outbox.Deferrals(ctx)
	if err != nil {
		return Report{}, err
	}
	if d := defs[""]; d.Until.After(w.o.Now()) {
		return Report{}, nil
	}
	held, err := w.o.Outbox.AcquireFlush(ctx, w.o.Owner, w.o.Lease)
	if err != nil || !held {
		return Report{Busy: !held && err == nil}, err
	}
	defer func() {
		if err := w.o.Outbox.ReleaseFlush(context.WithoutCancel(ctx), w.o.Owner); err != nil {
			w.log.Warn("giving back the flush lease failed; it ends by itself", slog.Any("error", err))
		}
	}()
	items, err := w.claim(ctx)
	if len(items) == 0 {
		return Report{}, err
	}
	h := w.holdBatch(ctx, items)
	ctx, span := w.tr.StartBatch(ctx, len(items))
	p := w.prepare(ctx, items)
	s := &sender{w: w, defs: defs}
	w.send(ctx, s, p)
	rep := Report{Claimed: len(items), Calls: s.calls, Overflow: s.overflow}
	w.settleAll(ctx, items, h.stop(), &rep)
	span.EndBatch(tracing.Batch{Records: len(p.records), Events: len(p.events), Notifications: len(p.notes),
		Calls: rep.Calls, Done: rep.Done, Retried: rep.Retried, Deferred: rep.Deferred, Overflow: rep.Overflow,
		ErrorCode: stopCode(s.stop)})
	return rep, err
}

// stopCode names the failure that stopped a round for its span: the
// Salesforce error code (REQUEST_LIMIT_EXCEEDED, INVALID_SESSION_ID, …) or
// else its class; "" when none did or the round only held back.
func stopCode(err error) string {
	if err == nil || errors.Is(err, errNotTried) {
		return ""
	}
	var e *sfapi.Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return string(sfapi.ClassOf(err))
}

// paused reports whether writes are paused now, from this replica's memory
// or the pause another replica stored.
func (w *Writer) paused(ctx context.Context) (bool, error) {
	now := w.o.Now()
	w.mu.Lock()
	till := w.pausedTill
	w.mu.Unlock()
	if till.After(now) {
		return true, nil
	}
	till, why, err := w.o.Outbox.PausedUntil(ctx)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	w.pausedTill, w.pauseWhy = till, why
	w.mu.Unlock()
	return till.After(now), nil
}

// Why every write is paused (the reason label of
// callout_salesforce_writes_paused).
const (
	// pauseAPILimit: the daily API limit (REQUEST_LIMIT_EXCEEDED
	// TotalRequests), for salesforce.limit_pause.
	pauseAPILimit = "api_limit"
	// pauseStorage: the org's data storage is full (STORAGE_LIMIT_EXCEEDED),
	// for StoragePause.
	pauseStorage = "storage_limit"
)

// StoragePause is how long every replica pauses its Salesforce writes after
// a write was refused with STORAGE_LIMIT_EXCEEDED: the whole outbox waits,
// not each record on its own backoff, and the first round after it tries
// again (pausing again while storage is still full). Freeing storage takes
// an admin or the nightly Failed_Callout__c purge, so minutes, not seconds.
const StoragePause = 30 * time.Minute

// pause pauses writes of every replica — for limit_pause after the daily
// API limit (REQUEST_LIMIT_EXCEEDED TotalRequests), for StoragePause after
// STORAGE_LIMIT_EXCEEDED (why names which) — and returns when they resume.
// Every replica reports it in callout_salesforce_writes_paused{reason}
// until it ends (the reason is stored with it).
func (w *Writer) pause(ctx context.Context, why string) time.Time {
	d, msg := w.sf.LimitPause, "Salesforce API limit exceeded (REQUEST_LIMIT_EXCEEDED): writes paused"
	if why == pauseStorage {
		d, msg = StoragePause, "Salesforce org data storage is full (STORAGE_LIMIT_EXCEEDED): every write paused; "+
			"free storage (delete old Failed_Callout__c records or schedule the purge) and writes resume by themselves"
	}
	till := w.o.Now().Add(d)
	w.mu.Lock()
	w.pausedTill, w.pauseWhy = till, why
	w.mu.Unlock()
	if err := w.o.Outbox.Pause(ctx, till, why); err != nil {
		w.log.Warn("storing the Salesforce pause failed; this replica pauses alone", slog.Any("error", err))
	}
	w.log.Warn(msg, slog.String("reason", why), slog.Time("until", till))
	return till
}

// b2f is 1 for true, 0 for false (a gauge's value).
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// claim leases due entries shard by shard until PerRound are claimed,
// starting each round one shard further, so that a busy shard cannot keep
// the others waiting.
func (w *Writer) claim(ctx context.Context) ([]*item, error) {
	shards, err := w.o.Outbox.DueShards(ctx)
	if err != nil || len(shards) == 0 {
		return nil, err
	}
	w.mu.Lock()
	start := w.rr % len(shards)
	w.rr++
	w.mu.Unlock()
	var items []*item
	for _, n := range slices.Concat(shards[start:], shards[:start]) {
		left := PerRound - len(items)
		if left <= 0 {
			break
		}
		got, err := w.o.Outbox.Claim(ctx, n, left, w.o.Lease)
		if err != nil {
			return items, err
		}
		for _, e := range got {
			kind, keys := policy.SplitEntry(e.Name)
			items = append(items, &item{OutboxEntry: e, kind: kind, keys: keys})
		}
	}
	return items, nil
}

// batchHold keeps a batch in flight held (contract §8: one replica writes a
// batch at a time): every third of the lease it renews the flush lease and
// the leases of the batch's claimed entries, so a live writer keeps them
// however long Salesforce takes, and a writer that died loses them one
// lease (salesforce.flush_lease) after its last renewal, when a survivor
// takes over.
type batchHold struct {
	w       *Writer
	leases  map[int]time.Time // by shard: the lease its entries carry now
	names   map[int][]string
	done    chan struct{}
	stopped chan struct{}
}

// holdBatch starts holding items (claimed by this round) until stop.
func (w *Writer) holdBatch(ctx context.Context, items []*item) *batchHold {
	h := &batchHold{w: w, leases: map[int]time.Time{}, names: map[int][]string{}, done: make(chan struct{}),
		stopped: make(chan struct{})}
	for _, it := range items {
		h.leases[it.Shard] = it.Lease
		h.names[it.Shard] = append(h.names[it.Shard], it.Name)
	}
	go h.run(ctx)
	return h
}

func (h *batchHold) run(ctx context.Context) {
	defer close(h.stopped)
	t := time.NewTicker(max(h.w.o.Lease/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !h.renew(ctx) {
			return
		}
	}
}

// renew renews the flush lease, then each shard's entries; false when
// another replica holds the flush lease now (this one was too slow to
// renew it: its entries may then be written twice, contract §8 allows it).
func (h *batchHold) renew(ctx context.Context) bool {
	w := h.w
	held, err := w.o.Outbox.AcquireFlush(ctx, w.o.Owner, w.o.Lease)
	if err != nil {
		w.log.Warn("renewing the flush lease failed; trying again", slog.Any("error", err))
		return true
	}
	if !held {
		w.log.Warn("the flush lease passed to another replica while this batch was in flight; "+
			"its entries may be written twice", slog.Duration("lease", w.o.Lease))
		return false
	}
	for shard, names := range h.names {
		lease, _, err := w.o.Outbox.Renew(ctx, shard, h.leases[shard], names, w.o.Lease)
		if err != nil {
			w.log.Warn("renewing the lease of outbox entries in flight failed; trying again",
				slog.Int("entries", len(names)), slog.Any("error", err))
			continue
		}
		h.leases[shard] = lease
	}
	return true
}

// stop ends the renewal and returns the lease each shard's entries carry.
func (h *batchHold) stop() map[int]time.Time {
	close(h.done)
	<-h.stopped
	return h.leases
}

// settleAll acks every item, shard by shard, fenced on the lease its
// shard's entries carry (leases, after the last renewal). An item left
// unsettled (a bug) is deferred briefly rather than lost. A failed ack is
// logged: the entries' leases end and they are tried again (at least
// once).
func (w *Writer) settleAll(ctx context.Context, items []*item, leases map[int]time.Time, rep *Report) {
	type group struct {
		lease time.Time
		acks  []policy.OutboxAck
	}
	byShard := map[int]*group{}
	for _, it := range items {
		if !it.set {
			w.log.Error("outbox entry left unsettled; trying it again shortly", slog.String("entry", it.Name))
			it.later(w.o.Now().Add(BaseBackoff))
		}
		switch it.ack.Verdict {
		case policy.VerdictDone:
			rep.Done++
		case policy.VerdictRetry:
			rep.Retried++
		default:
			rep.Deferred++
		}
		g := byShard[it.Shard]
		if g == nil {
			g = &group{lease: leases[it.Shard]}
			byShard[it.Shard] = g
		}
		g.acks = append(g.acks, it.ack)
	}
	for n, g := range byShard {
		if _, err := w.o.Outbox.Ack(ctx, n, g.lease, g.acks); err != nil {
			w.log.Error("settling outbox entries failed; they are tried again when their lease ends",
				slog.Int("entries", len(g.acks)), slog.Any("error", err))
		}
	}
}
