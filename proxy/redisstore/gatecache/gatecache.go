// Package gatecache is a replica's memory of its endpoints' gates, so that
// a read to a healthy endpoint asks Redis nothing (ARCHITECTURE.md "Hot-path
// budget"). It holds what the store's Lua computed (lib.lua gate_of,
// through admit.lua and gate_read.lua) and never derives a gate itself.
//
// A Cache wraps the store's core (Core; *redisstore.Store implements it):
// its Admit is the core's, whose reply it keeps; CachedAdmission answers
// from memory while Run runs. An entry is invalidated by a message on
// keyspace.GateChannel (any replica's gate change), by Changed (this
// replica's own change: pass Changed as redisstore.Options.GateChanged),
// and read again by a backstop poll every Options.MaxStale/2 (Core.ReadGates,
// one pipeline). A reading is never used once it is older than MaxStale,
// whether or not messages arrive; and every reading and invalidation carries
// a sequence number, so a reading taken before an invalidation never
// overwrites a later one nor outlives it.
package gatecache

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// DefaultMaxStale is Options.MaxStale's default (config
// redis.gate_staleness's default).
const DefaultMaxStale = 100 * time.Millisecond

// defaultIdle is Options.Idle's default.
const defaultIdle = time.Minute

// Core is what the cache needs of the store's core. *redisstore.Store
// implements it.
type Core interface {
	// Admit decides a read's gate in Redis (admit.lua: one round trip) and
	// takes the half-open probe token for it. Errors: policy.ErrUnavailable.
	Admit(ctx context.Context, endpoint string, br policy.BreakerSettings) (policy.Admission, error)
	// ReadGates reads the gates of endpoints in one pipeline
	// (gate_read.lua each, nothing taken): gates[i] and errs[i] are
	// endpoints[i]'s gate and failure count, or its error.
	ReadGates(ctx context.Context, endpoints []string) (gates []policy.Admission, errs []error)
}

// Subscriber opens a pub/sub subscription; a redis.UniversalClient
// implements it.
type Subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Options configures a Cache. Now is required; the others have defaults.
type Options struct {
	// MaxStale is the longest a cached gate is used after the Redis
	// reading it came from was sent (a poll or an admit): past it, a read
	// asks Redis again. The backstop poll runs every MaxStale/2, so in
	// steady state no entry gets that old. Default DefaultMaxStale
	// (config redis.gate_staleness).
	MaxStale time.Duration
	// Idle is how long an endpoint stays cached, and polled, after its
	// last read. Default 1 minute.
	Idle time.Duration
	// Now is the clock: the store's (redisstore.Options.Now, the replica's
	// clock corrected to Redis's, contract §1), since a reading's age and a
	// gate's Until (computed on the scripts' clock) are compared with it.
	// nil: time.Now.
	Now func() time.Time
	// Logger receives the rare warnings (a poll reply the code does not
	// understand). Default: discard.
	Logger *slog.Logger
}

// Stats counts what a Cache did since it was made (the
// callout_gate_cache_* metrics, docs/performance.md).
type Stats struct {
	// Hits are reads answered from memory (no Redis round trip): an open
	// gate, or a shut one before its Until.
	Hits uint64
	// Misses are reads that asked Redis (admit.lua): no entry, an entry
	// invalidated or older than MaxStale, a half-open breaker, a shut
	// gate past its Until.
	Misses uint64
	// Messages are gate-change messages received on keyspace.GateChannel.
	Messages uint64
	// Polls are backstop polls that read every cached gate.
	Polls uint64
}

// reading is one gate as Redis computed it. Immutable once made.
type reading struct {
	// seq orders readings and invalidations: a reading is taken after
	// every invalidation with a smaller number was received.
	seq uint64
	// at is when the reading's request was sent (Options.Now): the state
	// it reflects is at least this recent.
	at       time.Time
	gate     policy.Gate
	failures int
}

// entry is one endpoint's cached gate.
type entry struct {
	reading atomic.Pointer[reading]
	// mark is the sequence number of the latest invalidation; a reading
	// with seq <= mark is not used.
	mark atomic.Uint64
	// used is the clock's Unix ns of the latest lookup (idle expiry).
	used atomic.Int64
}

// Cache is a replica's memory of its endpoints' gates. It is safe for
// concurrent use. Lookups run under a read lock and touch atomics only;
// entries are made on an endpoint's first read.
type Cache struct {
	core   Core
	sub    Subscriber
	opts   Options
	log    *slog.Logger
	seq    atomic.Uint64
	active atomic.Bool

	mu sync.RWMutex
	// byEP: gate name (an endpoint, or keyspace.PartitionGate's
	// "endpoint/issuer" of an organisation's breaker partition) -> entry
	byEP map[string]*entry

	hits, misses, messages, polls atomic.Uint64
}

// New returns a Cache over core, subscribing through sub while Run runs.
// It answers nothing from memory until Run starts.
func New(core Core, sub Subscriber, o Options) *Cache {
	if o.MaxStale <= 0 {
		o.MaxStale = DefaultMaxStale
	}
	if o.Idle <= 0 {
		o.Idle = defaultIdle
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{core: core, sub: sub, opts: o, log: log,
		byEP: map[string]*entry{}}
}

// CachedAdmission answers a read's gate from memory, with no Redis round
// trip, when it can: while Run runs, an endpoint whose cached gate is open
// is admitted with the cached consecutive-failure count, and one whose gate
// is disabled, or shut with its Until still ahead (breaker open until the
// probe time, paused, a probe out), is refused — what admit.lua answered,
// as of a reading at most MaxStale old. ok is false otherwise (no fresh
// entry, a half-open breaker, a probe time or pause end reached, Run not
// running): call Admit, which takes the probe token in Redis and whose
// reply refreshes the entry. It does not allocate once the endpoint has an
// entry (ARCHITECTURE.md "Hot-path budget").
func (c *Cache) CachedAdmission(endpoint string) (a policy.Admission, ok bool) {
	if !c.active.Load() {
		return policy.Admission{}, false
	}
	if a, ok = c.entry(endpoint).lookup(c.opts.Now(), c.opts.MaxStale); ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return a, ok
}

// Admit is Core.Admit, whose reply it keeps (while Run runs) unless this
// request took the probe token: the gate is then 'probing', and the next
// read learns until when from Redis. Errors: Core.Admit's.
func (c *Cache) Admit(ctx context.Context, endpoint string, br policy.BreakerSettings) (policy.Admission, error) {
	// The sequence number and the time are taken before the request is
	// sent: an invalidation received while it is under way wins.
	seq, now := c.seq.Add(1), c.opts.Now()
	a, err := c.core.Admit(ctx, endpoint, br)
	if err != nil || !c.active.Load() || a.ProbeToken != "" {
		return a, err
	}
	c.entry(endpoint).offer(&reading{seq: seq, at: now, gate: a.Gate, failures: a.ConsecutiveFailures})
	return a, nil
}

// Changed invalidates endpoint's entries (its own and its breaker
// partitions'), if it has any: a transition this replica caused. Pass it
// as redisstore.Options.GateChanged.
func (c *Cache) Changed(endpoint string) {
	c.invalidateWhere(func(ep string) bool { return ep == endpoint })
}

// invalidateWhere invalidates the entries whose endpoint (a gate name's,
// keyspace.SplitGate) match says.
func (c *Cache) invalidateWhere(match func(endpoint string) bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for name, e := range c.byEP {
		if ep, _ := keyspace.SplitGate(name); match(ep) {
			c.invalidate(e)
		}
	}
}

// Stats returns the cache's counters (for metrics).
func (c *Cache) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(),
		Messages: c.messages.Load(), Polls: c.polls.Load()}
}

// entry returns endpoint's entry, making it on first use.
func (c *Cache) entry(endpoint string) *entry {
	c.mu.RLock()
	e := c.byEP[endpoint]
	c.mu.RUnlock()
	if e != nil {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e = c.byEP[endpoint]; e == nil {
		e = &entry{}
		c.byEP[endpoint] = e
	}
	return e
}

// lookup answers a read of the entry at now from memory when it can: a
// reading newer than the latest invalidation and at most maxStale old,
// whose gate is open (forward, with the cached failure count), disabled,
// or shut with now before its Until (refuse). Anything else — a half-open
// breaker (the probe token is taken in Redis), a time-based end reached
// (probe time, pause end, probe lease expiry) — is a miss: Redis decides.
func (e *entry) lookup(now time.Time, maxStale time.Duration) (policy.Admission, bool) {
	if u := now.UnixNano(); now.Sub(time.Unix(0, e.used.Load())) > time.Second {
		e.used.Store(u)
	}
	r := e.reading.Load()
	if r == nil || r.seq <= e.mark.Load() || now.Sub(r.at) > maxStale {
		return policy.Admission{}, false
	}
	switch r.gate.State {
	case policy.GateOpen:
		return policy.Admission{Gate: r.gate, ConsecutiveFailures: r.failures}, true
	case policy.GateDisabled:
		return policy.Admission{Gate: r.gate}, true
	case policy.GatePaused, policy.GateBreakerOpen, policy.GateProbing:
		if now.Before(r.gate.Until) {
			return policy.Admission{Gate: r.gate}, true
		}
	}
	return policy.Admission{}, false
}

// offer keeps r unless the entry already has a later reading.
func (e *entry) offer(r *reading) {
	for {
		old := e.reading.Load()
		if old != nil && old.seq >= r.seq {
			return
		}
		if e.reading.CompareAndSwap(old, r) {
			return
		}
	}
}

// invalidate makes every reading taken so far unusable.
func (c *Cache) invalidate(e *entry) {
	m := c.seq.Add(1)
	for {
		old := e.mark.Load()
		if old >= m || e.mark.CompareAndSwap(old, m) {
			return
		}
	}
}

// message handles a gate-change message naming an endpoint hash key.
func (c *Cache) message(key string) {
	c.messages.Add(1)
	c.invalidateWhere(func(ep string) bool { return keyspace.Endpoint(ep) == key })
}

// invalidateAll invalidates every entry: on (re)subscription, when
// messages may have been missed.
func (c *Cache) invalidateAll() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.byEP {
		c.invalidate(e)
	}
}

// pollable returns the endpoints read within Idle of now, dropping the
// others' entries.
func (c *Cache) pollable(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.byEP))
	for ep, e := range c.byEP {
		if now.Sub(time.Unix(0, e.used.Load())) > c.opts.Idle {
			delete(c.byEP, ep)
			continue
		}
		out = append(out, ep)
	}
	return out
}
