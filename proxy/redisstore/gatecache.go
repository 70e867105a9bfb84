package redisstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Gate cache defaults (GateCacheOptions).
const (
	// DefaultGateStaleness is GateCacheOptions.MaxStale's default.
	DefaultGateStaleness = 100 * time.Millisecond
	// defaultGateIdle is how long an endpoint stays cached (and polled)
	// after its last read.
	defaultGateIdle = time.Minute
)

// GateCacheOptions configures the gate cache (Store.WatchGates). The zero
// value works.
type GateCacheOptions struct {
	// MaxStale is the longest a cached gate is used after the Redis
	// reading it came from was sent (a poll or an admit): past it, a read
	// asks Redis again. The backstop poll runs every MaxStale/2, so in
	// steady state no entry gets that old. Default DefaultGateStaleness.
	MaxStale time.Duration
	// Idle is how long an endpoint stays cached, and polled, after its
	// last read. Default 1 minute.
	Idle time.Duration
}

func (o GateCacheOptions) withDefaults() GateCacheOptions {
	if o.MaxStale <= 0 {
		o.MaxStale = DefaultGateStaleness
	}
	if o.Idle <= 0 {
		o.Idle = defaultGateIdle
	}
	return o
}

// GateCacheStats counts what the gate cache did since the Store was made.
type GateCacheStats struct {
	// Hits are reads answered from memory (no Redis round trip): an open
	// gate, or a shut one before its Until.
	Hits uint64
	// Misses are reads that asked Redis (admit.lua): no entry, an entry
	// invalidated or older than MaxStale, a half-open breaker, a shut
	// gate past its Until.
	Misses uint64
	// Messages are gate-change messages received on the pub/sub channel.
	Messages uint64
	// Polls are backstop polls that read every cached gate.
	Polls uint64
}

// gateReading is one gate as Redis computed it (lib.lua gate(), through
// admit.lua or gate_read.lua): the cache holds what Lua decided, never
// derives a gate from stored fields. Immutable once made.
type gateReading struct {
	// seq orders readings and invalidations: a reading is taken after
	// every invalidation with a smaller number was received.
	seq uint64
	// at is when the reading's request was sent (the store's clock): the
	// state it reflects is at least this recent.
	at       time.Time
	gate     policy.Gate
	failures int
}

// gateEntry is one endpoint's cached gate.
type gateEntry struct {
	reading atomic.Pointer[gateReading]
	// mark is the sequence number of the latest invalidation; a reading
	// with seq <= mark is not used.
	mark atomic.Uint64
	// used is the store clock's Unix ns of the latest lookup (idle expiry).
	used atomic.Int64
}

// gateCache is a replica's memory of its endpoints' gates. It
// is safe for concurrent use. Lookups run under a read lock and touch
// atomics only; entries are made on an endpoint's first read.
type gateCache struct {
	seq    atomic.Uint64
	active atomic.Bool
	opts   GateCacheOptions

	mu    sync.RWMutex
	byEP  map[string]*gateEntry // endpoint name -> entry
	byKey map[string]*gateEntry // endpoint hash key -> entry

	hits, misses, messages, polls atomic.Uint64
}

func newGateCache() *gateCache {
	return &gateCache{opts: GateCacheOptions{}.withDefaults(),
		byEP: map[string]*gateEntry{}, byKey: map[string]*gateEntry{}}
}

// entry returns endpoint's entry, making it on first use.
func (c *gateCache) entry(endpoint string) *gateEntry {
	c.mu.RLock()
	e := c.byEP[endpoint]
	c.mu.RUnlock()
	if e != nil {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e = c.byEP[endpoint]; e == nil {
		e = &gateEntry{}
		c.byEP[endpoint] = e
		c.byKey[keysOf(endpoint).ep] = e
	}
	return e
}

// lookup answers a read of the entry at now from memory when it can: a
// reading newer than the latest invalidation and at most MaxStale old,
// whose gate is open (forward, with the cached failure count), disabled,
// or shut with now before its Until (refuse). Anything else — a half-open
// breaker (the probe token is taken in Redis), a time-based end reached
// (probe time, pause end, probe lease expiry) — is a miss: Redis decides.
func (e *gateEntry) lookup(now time.Time, maxStale time.Duration) (policy.Admission, bool) {
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
func (e *gateEntry) offer(r *gateReading) {
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
func (c *gateCache) invalidate(e *gateEntry) {
	m := c.seq.Add(1)
	for {
		old := e.mark.Load()
		if old >= m || e.mark.CompareAndSwap(old, m) {
			return
		}
	}
}

// changed invalidates endpoint's entry, if it has one (a transition this
// replica caused: its scripts' replies said so).
func (c *gateCache) changed(endpoint string) {
	c.mu.RLock()
	e := c.byEP[endpoint]
	c.mu.RUnlock()
	if e != nil {
		c.invalidate(e)
	}
}

// message handles a gate-change message naming an endpoint hash key.
func (c *gateCache) message(key string) {
	c.messages.Add(1)
	c.mu.RLock()
	e := c.byKey[key]
	c.mu.RUnlock()
	if e != nil {
		c.invalidate(e)
	}
}

// invalidateAll invalidates every entry: on (re)subscription, when
// messages may have been missed.
func (c *gateCache) invalidateAll() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.byEP {
		c.invalidate(e)
	}
}

// pollable returns the endpoints read within Idle of now, dropping the
// others' entries.
func (c *gateCache) pollable(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.byEP))
	for ep, e := range c.byEP {
		if now.Sub(time.Unix(0, e.used.Load())) > c.opts.Idle {
			delete(c.byEP, ep)
			delete(c.byKey, keysOf(ep).ep)
			continue
		}
		out = append(out, ep)
	}
	return out
}

func (c *gateCache) stats() GateCacheStats {
	return GateCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(),
		Messages: c.messages.Load(), Polls: c.polls.Load()}
}
