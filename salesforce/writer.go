package salesforce

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// Store is what the writer reads and changes in the proxy's own store.
// *redisstore.Store implements it.
type Store interface {
	Get(ctx context.Context, id string) (*policy.Callout, error)
	Discard(ctx context.Context, id string) error
	EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error)
	TryLock(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
}

// Outbox is the durable outbox in Redis. *redisstore.Outbox implements it.
type Outbox interface {
	DueShards(ctx context.Context) ([]int, error)
	Claim(ctx context.Context, shard, limit int, lease time.Duration) ([]redisstore.OutboxEntry, error)
	Ack(ctx context.Context, shard int, lease time.Time, acks []redisstore.OutboxAck) (int, error)
	Put(ctx context.Context, at time.Time, items ...redisstore.OutboxItem) (int, error)
	Len(ctx context.Context) (int64, error)
	RecordState(ctx context.Context, root string) (redisstore.RecordState, error)
	SetRecordStatus(ctx context.Context, root string, ch redisstore.StatusChange) (bool, error)
	RootOf(ctx context.Context, id string) (string, error)
	ExpiryShards(ctx context.Context) ([]int, error)
	Expire(ctx context.Context, shard, limit int) ([]string, error)
	Pause(ctx context.Context, until time.Time) error
	PausedUntil(ctx context.Context) (time.Time, error)
	Watermark(ctx context.Context, name string) (time.Time, error)
	SetWatermark(ctx context.Context, name string, t time.Time) error
}

// API is what the writer calls in Salesforce. *Client implements it.
type API interface {
	UpsertCollection(ctx context.Context, object, extField string, records []Record) ([]error, error)
	CreateCollection(ctx context.Context, object string, records []Record) ([]error, error)
	InvokeAction(ctx context.Context, action string, inputs []Record) ([]error, error)
	Query(ctx context.Context, statement string, each func(Record) error) error
	UsageRatio() float64
}

// Outbox retry timing. Failed writes back off exponentially with equal
// jitter between BaseBackoff and MaxBackoff; a write Salesforce rejects
// (a validation rule, a missing field) stays in the outbox and is tried
// again every RejectedRetry, in case an admin fixes the org.
const (
	BaseBackoff   = 5 * time.Second
	MaxBackoff    = 10 * time.Minute
	RejectedRetry = time.Hour
	// DefaultLease is how long a replica holds the outbox entries it
	// claimed: longer than one round of calls.
	DefaultLease = 5 * time.Minute
	// PerRound is the most entries one round claims: two collection calls
	// of each kind.
	PerRound = 2 * MaxCollection
)

// WriterOptions configure a Writer. API, Store, Outbox and Config (with a
// salesforce section) are required.
type WriterOptions struct {
	API    API
	Store  Store
	Outbox Outbox
	// Config gives the endpoints (owner, redaction), the dead-letter
	// retention and the salesforce section's settings.
	Config *config.Config
	// Metrics, when set, receives the outbox and API-usage gauges.
	Metrics *Metrics
	Logger  *slog.Logger
	// Now is the clock (time.Now when nil); Rand the backoff jitter in
	// [0,1) (math/rand/v2 when nil).
	Now  func() time.Time
	Rand func() float64
	// Owner names this replica in the poll lock (a random token).
	Owner string
	// Webhook posts to salesforce.webhook_url. Default: a client with a
	// 10 s timeout that follows no redirects.
	Webhook *http.Client
	// Lease is how long claimed entries are held. Default DefaultLease.
	Lease time.Duration
}

// Writer writes what the proxy must tell Salesforce, from the durable
// outbox (SPEC §7, §8, §6): dead letters as Failed_Callout__c records,
// their status changes, Callout_Result__e completion events and owner
// notifications. The store's scripts queue those entries in the same
// script as the change that causes them (redisstore.Options.Outbox), so a
// crash between a dead letter and its mirror loses nothing; every replica
// runs a Writer, and the outbox's leases keep two replicas from sending
// the same entry at once.
//
// The dispatcher's endings and disables need no call: their entries are
// queued already; the composition root wakes the writer on them (Wake) so
// that they are written without waiting for the next tick.
type Writer struct {
	o     WriterOptions
	sf    config.Salesforce
	rules map[string]*redact.Rules
	log   *slog.Logger
	wake  chan struct{}

	mu         sync.Mutex
	pausedTill time.Time // a known REQUEST_LIMIT_EXCEEDED pause
	nextCallAt time.Time // while slowed down: the earliest next call
	slowed     bool      // API usage was at or above api_usage_slowdown
	notifType  string    // cached CustomNotificationType id
	rr         int       // rounds started: the first shard claimed rotates
}

// NewWriter returns a Writer with o's defaults filled in. Errors: a
// missing dependency or salesforce section.
func NewWriter(o WriterOptions) (*Writer, error) {
	if o.API == nil || o.Store == nil || o.Outbox == nil || o.Config == nil || o.Config.Salesforce == nil {
		return nil, fmt.Errorf("salesforce: writer needs an API, a store, an outbox and a salesforce section")
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
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	w := &Writer{o: o, sf: *o.Config.Salesforce, rules: map[string]*redact.Rules{},
		log: o.Logger.With(slog.String("component", "salesforce")), wake: make(chan struct{}, 1)}
	for name, ep := range o.Config.Endpoints {
		if ep != nil {
			injected := make([]string, 0, len(ep.Headers))
			for h := range ep.Headers {
				injected = append(injected, h)
			}
			slices.Sort(injected)
			w.rules[name] = redact.New(ep.Redact, injected)
		}
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

// StatusChanged records that the Failed_Callout__c record of dead letter
// id must show status (one of Statuses; e.g. Reprocessing when a replay of
// it starts, with replay the new chain's callout id, "" when none) and
// queues the write, in one script: the record is the one of id's root (the
// first dead letter of its replay chains). A change older than the
// record's current status is ignored. Replay endings need no call: the
// writer marks a replay chain's record Reprocessed when the chain succeeds
// and Failed Again (with the chain's attempts) when it dead-letters.
// Errors: an unknown status, redisstore.ErrNotFound for a malformed id,
// redisstore.ErrUnavailable.
func (w *Writer) StatusChanged(ctx context.Context, id, status, replay string) error {
	return w.statusAt(ctx, id, status, replay, w.o.Now())
}

// statusAt is StatusChanged for an event that happened at at: a change
// older than the record's current status is ignored.
func (w *Writer) statusAt(ctx context.Context, id, status, replay string, at time.Time) error {
	if !slices.Contains(Statuses, status) {
		return fmt.Errorf("salesforce: status %q is not a Failed_Callout__c status", status)
	}
	root, err := w.rootOfID(ctx, id)
	if err != nil {
		return err
	}
	_, err = w.o.Outbox.SetRecordStatus(ctx, root, redisstore.StatusChange{Status: status, Replay: replay,
		At: at, Write: true})
	w.Wake()
	return err
}

// backoff is the delay before the next try of an entry that failed tries
// times: equal jitter under BaseBackoff·2^(tries−1), at most MaxBackoff.
func (w *Writer) backoff(tries int) time.Duration {
	c := policy.Ceiling(policy.Policy{BaseDelay: BaseBackoff, Multiplier: 2, MaxDelay: MaxBackoff}, tries)
	r := min(max(w.o.Rand(), 0), 1)
	return c/2 + time.Duration(r*float64(c/2))
}

// rulesOf returns an endpoint's redaction rules (nil — the fixed headers
// only — for an endpoint no longer configured).
func (w *Writer) rulesOf(endpoint string) *redact.Rules { return w.rules[endpoint] }
