package salesforce

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// Store is what the writer reads and changes in the proxy's own store. The
// store's core (proxy/redisstore) implements it.
type Store interface {
	Get(ctx context.Context, id string) (*policy.Callout, error)
	Discard(ctx context.Context, id string) error
	EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error)
	TryLock(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
}

// Outbox is the durable outbox the writer consumes (contract §7, §8): its
// entries, the state of each Failed_Callout__c record, and what every
// replica's writer shares. The store's outbox (proxy/redisstore/outbox)
// implements it; its methods document their round trips and errors
// (policy.ErrUnavailable when Redis cannot serve them).
type Outbox interface {
	Entries
	Records
	Shared
}

// Entries are the outbox's entries, named policy.EntryName. Claim leases up
// to limit of one shard's due entries until now+lease (at-least-once: an
// entry whose consumer died is due again when its lease ends); Renew
// extends the lease of claimed entries while their batch is in flight,
// returning the lease they carry afterwards; Ack settles
// claimed entries of that shard while they still hold lease, reporting how
// many had been claimed again meanwhile; DueShards lists the shards with
// an entry due now; DueStats counts the due entries and when the oldest of
// them became due; Len counts every entry (due, claimed or waiting).
type Entries interface {
	DueShards(ctx context.Context) ([]int, error)
	Claim(ctx context.Context, shard, limit int, lease time.Duration) ([]policy.OutboxEntry, error)
	Renew(ctx context.Context, shard int, lease time.Time, names []string, extend time.Duration) (time.Time, int, error)
	Ack(ctx context.Context, shard int, lease time.Time, acks []policy.OutboxAck) (stale int, err error)
	DueStats(ctx context.Context) (due int64, oldest time.Time, err error)
	Len(ctx context.Context) (int64, error)
}

// Records is the state of the Failed_Callout__c records, by root (the dead
// letter a record was created for, contract §7, §8). SetRecordStatus applies
// a change (ignored, false, when older than the record's status) and queues
// its write when asked; RootOf finds the root of a replay dead letter
// linked to it ("" none); ExpiryShards and Expire run the expiry check
// that marks a record Expired once the proxy's copy is gone (contract §7),
// returning the roots marked; KeepPending keeps the callout records that
// queued mirrors and completion events still need (margin at least, limit
// past the first extension at most).
type Records interface {
	RecordState(ctx context.Context, root string) (policy.RecordState, error)
	SetRecordStatus(ctx context.Context, root string, ch policy.StatusChange) (bool, error)
	RootOf(ctx context.Context, id string) (string, error)
	ExpiryShards(ctx context.Context) ([]int, error)
	Expire(ctx context.Context, shard, limit int) (roots []string, err error)
	KeepPending(ctx context.Context, margin, limit time.Duration) (kept, capped int, err error)
}

// Shared is what every replica's writer shares (contract §8 "Salesforce
// writes are batched"): the flush lease (one replica writes a batch at a
// time; true when owner holds it), the deferrals of writes after failed
// calls by scope ("" all, or an sObject), the pause of every write after
// REQUEST_LIMIT_EXCEEDED, and the poll watermarks by name (the zero time
// when unset).
type Shared interface {
	AcquireFlush(ctx context.Context, owner string, lease time.Duration) (bool, error)
	ReleaseFlush(ctx context.Context, owner string) error
	Deferrals(ctx context.Context) (map[string]policy.Deferral, error)
	Defer(ctx context.Context, scope string, until func(fails int) time.Time) (policy.Deferral, error)
	Hold(ctx context.Context, scope string, until time.Time) (policy.Deferral, error)
	ClearDeferral(ctx context.Context, scope string) error
	Pause(ctx context.Context, until time.Time, why string) error
	PausedUntil(ctx context.Context) (time.Time, string, error)
	Watermark(ctx context.Context, name string) (time.Time, error)
	SetWatermark(ctx context.Context, name string, t time.Time) error
}

// API is what the writer calls in Salesforce. *sfapi.Client implements it.
type API interface {
	Composite(ctx context.Context, subs []sfapi.Subrequest) ([]sfapi.SubResult, error)
	InvokeAction(ctx context.Context, action string, inputs []sfapi.Record) ([]error, error)
	Query(ctx context.Context, statement string, each func(sfapi.Record) error) error
	UsageRatio() float64
}

// Outbox retry timing. A failed call defers its whole batch to one time,
// and every write behind it: equal jitter under BaseBackoff doubling per
// failed call in a row, at most MaxBackoff. A record that failed alone
// (a row lock) backs off the same way on its own. What Salesforce rejects
// as it is — a record (a validation rule) or a whole collection (a field
// the integration user cannot see, INVALID_FIELD) — stays in the outbox
// and is tried again after RejectedRetry, doubling to RejectedCeiling, in
// case an admin fixes the org. Too many long requests at once
// (REQUEST_LIMIT_EXCEEDED ConcurrentPerOrgLongTxn) hold writes back
// briefly: ConcurrentBackoff doubling to ConcurrentMax; the daily API
// limit pauses them for salesforce.limit_pause.
const (
	BaseBackoff       = 5 * time.Second
	MaxBackoff        = 10 * time.Minute
	RejectedRetry     = time.Hour
	RejectedCeiling   = 24 * time.Hour
	ConcurrentBackoff = 2 * time.Second
	ConcurrentMax     = time.Minute
	// PerRound is the most entries one round claims: what one Composite
	// request carries at most (sfapi.MaxCollections collections of
	// sfapi.MaxCollection records).
	PerRound = sfapi.MaxCollections * sfapi.MaxCollection
)

// Endpoint is what the writer needs of one configured endpoint.
type Endpoint struct {
	// Owner is the Salesforce user told of outages and disables; "" none.
	Owner string
	// Redact hides the endpoint's secrets (nil: the fixed headers only).
	Redact *redact.Rules
	// CompletionEvents is endpoints.*.completion_events: "all",
	// "dead_letters", "none", or "" (all for a callout that carries a
	// Callout-Source-Record, else dead_letters).
	CompletionEvents string
}

// WriterOptions configure a Writer. API, Store and Outbox are required.
type WriterOptions struct {
	API   API
	Store Store
	// Outbox is the durable outbox in Redis (proxy/redisstore/outbox).
	Outbox Outbox
	// Salesforce is the salesforce section (zero settings take the
	// config.Default* values).
	Salesforce config.Salesforce
	// Endpoints are the configured endpoints by name: owners, redaction,
	// completion events. An endpoint no longer configured has no owner
	// and only the fixed redaction.
	Endpoints map[string]Endpoint
	// DeadLetterRetention is policy.dead_letter_retention, for
	// Expires_At__c; it and IdempotencyRetention
	// (policy.idempotency_retention) also set how often the records of
	// queued writes are kept (Writer.KeepPending).
	DeadLetterRetention  time.Duration
	IdempotencyRetention time.Duration
	// Metrics, when set, counts the calls and write errors, and computes
	// the outbox and API-usage gauges from this writer at each scrape.
	Metrics *Metrics
	Logger  *slog.Logger
	// Now is the clock (time.Now when nil); Rand the backoff jitter in
	// [0,1) (math/rand/v2 when nil).
	Now  func() time.Time
	Rand func() float64
	// Owner names this replica in the poll lock and the flush lease (a
	// random token).
	Owner string
	// Webhook posts to salesforce.webhook_url. Default: a client with a
	// 10 s timeout that follows no redirects.
	Webhook *http.Client
	// Lease is how long claimed entries and the flush lease are held
	// without renewal; a round renews both every third of it while its
	// batch is in flight. Default salesforce.flush_lease
	// (config.DefaultFlushLease).
	Lease time.Duration
	// TracerProvider, optional, makes a span of every write batch (Round
	// with entries): its counts of records, events, notifications and API
	// calls (docs/tracing.md). nil or a no-op provider: none.
	TracerProvider trace.TracerProvider
}

// Writer writes what the proxy must tell Salesforce, from the durable
// outbox (contract §7, §8, §6): dead letters as Failed_Callout__c records,
// their status changes, Callout_Result__e completion events and owner
// notifications. The store's scripts queue those entries in the same
// script as the change that causes them (the store's Options.Outbox), so a
// crash between a dead letter and its mirror loses nothing. Every replica
// runs a Writer; one at a time writes a batch (the flush lease), when it
// is full or its first entry waited salesforce.batch_linger, in one
// Composite request (contract §8), and the outbox's leases keep two replicas
// from sending the same entry at once.
//
// The dispatcher's endings and disables need no call: their entries are
// queued already; the composition root wakes the writer on them (Wake) so
// that they are written without waiting for the next tick.
type Writer struct {
	o    WriterOptions
	sf   config.Salesforce
	log  *slog.Logger
	wake chan struct{}
	tr   *tracing.Tracer // nil: tracing off

	mu         sync.Mutex
	pausedTill time.Time   // a known pause of every write
	pauseWhy   string      // why (pauseAPILimit, pauseStorage), as last known; "" none
	nextCallAt time.Time   // while slowed down: the earliest next call
	slowed     bool        // API usage was at or above api_usage_slowdown
	notifType  string      // cached CustomNotificationType id
	rr         int         // rounds started: the first shard claimed rotates
	refusing   sfapi.Class // the class of the failed calls since the last success ("" none)
	// refusedRecords are the classes of record refusals logged since the
	// last record saved (recordRefused).
	refusedRecords map[sfapi.Class]bool
}

// NewWriter returns a Writer with o's defaults filled in. Errors: a
// missing dependency.
func NewWriter(o WriterOptions) (*Writer, error) {
	if o.API == nil || o.Store == nil || o.Outbox == nil {
		return nil, fmt.Errorf("salesforce: writer needs an API, a store and an outbox")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Webhook == nil {
		o.Webhook = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	sf := o.Salesforce
	if o.Lease <= 0 {
		o.Lease = cmp.Or(sf.FlushLease, config.DefaultFlushLease)
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&sf.OutboxInterval, config.DefaultOutboxInterval)
	def(&sf.PollInterval, config.DefaultPollInterval)
	def(&sf.ReprocessInterval, config.DefaultReprocessInterval)
	def(&sf.SlowdownInterval, config.DefaultSlowdownInterval)
	def(&sf.LimitPause, config.DefaultLimitPause)
	if sf.BatchLinger < 0 {
		sf.BatchLinger = 0
	}
	if sf.BatchMaxBytes <= 0 {
		sf.BatchMaxBytes = config.DefaultBatchMaxBytes
	}
	if sf.APIUsageSlowdown <= 0 {
		sf.APIUsageSlowdown = config.DefaultAPIUsageSlowdown
	}
	w := &Writer{o: o, sf: sf, log: o.Logger.With(slog.String("component", "salesforce")),
		wake: make(chan struct{}, 1), tr: tracing.New(o.TracerProvider, nil), refusedRecords: map[sfapi.Class]bool{}}
	if o.Metrics != nil {
		o.Metrics.writer.Store(w) // the scrape-time gauges read this writer's outbox and client
	}
	return w, nil
}

// Wake makes Run look at the outbox now instead of at its next tick.
func (w *Writer) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// about returns ctx for a log line about callout id (contract §12 "Log
// fields"): the handler of logx.New adds its callout_id and the caller's
// trace_id, from stored, the trace context the callout was accepted under
// (policy.Callout.TraceContext), or when stored is "" from the callout
// looked up in the store (a line about one callout is rare: a refusal, a
// reprocess request); a callout gone, or accepted without a traceparent,
// logs without trace_id. The batch's own span, when tracing is on, is left
// out: the line is the caller's trace, not the writer's.
func (w *Writer) about(ctx context.Context, id, stored string) context.Context {
	if stored == "" {
		if c, err := w.get(ctx, id); err == nil && c != nil {
			stored = c.TraceContext
		}
	}
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	return logx.WithCallout(logx.WithTraceContext(ctx, stored), id)
}

// StatusChanged records that the Failed_Callout__c record of dead letter
// id must show status (one of Statuses; e.g. Reprocessing when a replay of
// it starts, with replay the new chain's callout id, "" when none) and
// queues the write, in one script: the record is the one of id's root (the
// first dead letter of its replay chains). The change is stamped with
// Redis's now; one older than the record's current status is ignored, and
// a replay chain's Reprocessing never replaces its own Reprocessed or
// Failed Again, whichever is recorded first. Only the proxy's own transitions
// (Transitions) are ever written to Status__c, and never over an admin's
// choice made since the last poll (see Writer.guard). Replay endings need no call: the
// writer marks a replay chain's record Reprocessed when the chain succeeds
// and Failed Again (with the chain's attempts) when it dead-letters.
// Errors: an unknown status, policy.ErrNotFound for a malformed id,
// policy.ErrUnavailable.
func (w *Writer) StatusChanged(ctx context.Context, id, status, replay string) error {
	return w.statusAt(ctx, id, status, replay, time.Time{}, time.Time{})
}

// statusAt is StatusChanged for an event that happened at at (zero: Redis's
// now, when the change is recorded): a change older than the record's
// current status is ignored, except that a replay chain's end always wins
// over its start (Outbox.SetRecordStatus). answers, when set, is
// the SystemModstamp of the admin's Reprocess Requested the status
// answers: it may then be written over that request.
func (w *Writer) statusAt(ctx context.Context, id, status, replay string, at, answers time.Time) error {
	if !slices.Contains(policy.RecordStatuses, status) {
		return fmt.Errorf("salesforce: status %q is not a Failed_Callout__c status", status)
	}
	root, err := w.rootOfID(ctx, id)
	if err != nil {
		return err
	}
	_, err = w.o.Outbox.SetRecordStatus(ctx, root, policy.StatusChange{Status: status, Replay: replay,
		At: at, Write: true, Answers: answers})
	w.Wake()
	return err
}

// backoff is the delay before the next try after tries failures in a row:
// equal jitter under BaseBackoff·2^(tries−1), at most MaxBackoff.
func (w *Writer) backoff(tries int) time.Duration {
	c := policy.Ceiling(policy.Policy{BaseDelay: BaseBackoff, Multiplier: 2, MaxDelay: MaxBackoff}, tries)
	r := min(max(w.o.Rand(), 0), 1)
	return c/2 + time.Duration(r*float64(c/2))
}

// rejectedBackoff is the delay before the next try of a write Salesforce
// rejected tries times in a row: RejectedRetry·2^(tries−1), at most
// RejectedCeiling.
func rejectedBackoff(tries int) time.Duration {
	return policy.Ceiling(policy.Policy{BaseDelay: RejectedRetry, Multiplier: 2, MaxDelay: RejectedCeiling}, tries)
}

// concurrentBackoff is the pause after tries REQUEST_LIMIT_EXCEEDED
// answers for concurrent long requests in a row: ConcurrentBackoff·2^(tries−1),
// at most ConcurrentMax.
func concurrentBackoff(tries int) time.Duration {
	return policy.Ceiling(policy.Policy{BaseDelay: ConcurrentBackoff, Multiplier: 2, MaxDelay: ConcurrentMax}, tries)
}

// endpoint returns what the writer knows of an endpoint (the zero
// Endpoint for one no longer configured).
func (w *Writer) endpoint(name string) Endpoint { return w.o.Endpoints[name] }

// rulesOf returns an endpoint's redaction rules (nil — the fixed headers
// only — for an endpoint no longer configured).
func (w *Writer) rulesOf(endpoint string) *redact.Rules { return w.endpoint(endpoint).Redact }
