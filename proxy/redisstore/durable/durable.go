// Package durable confirms the store's writes durable before their callers
// are answered (config redis.durability replicated or fsync, contract §11;
// docs/operating.md "Durability"): WAIT for replicas, or WAITAOF for the
// append-only file, grouped so that one round at Redis answers every write
// that was waiting for it. The store (proxy/redisstore) declares the
// interface it uses; cmd/callout-proxy wires this implementation in.
package durable

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// Options configures an Acknowledger (config redis.durability, contract
// §11).
type Options struct {
	// Replicas is how many replicas must confirm a round: WAIT's
	// numreplicas (with AOF, WAITAOF's). 1 for durability replicated.
	Replicas int
	// AOF waits for the append-only file's fsync instead (WAITAOF 1
	// Replicas): durability fsync. Needs Redis 7.2 or later (CheckVersion).
	AOF bool
	// Timeout bounds one round at Redis (WAIT's timeout, whole
	// milliseconds, at least 1). Default 1s.
	Timeout time.Duration
}

// Acknowledger makes writes durable before their callers are answered, in
// groups per primary: every Ack that arrives while a round is at its
// primary joins that primary's next round, and one round — a pipeline of
// INCR and WAIT (or WAITAOF) on one connection to the primary — confirms
// everything the primary executed before it, because a node's replication
// offset is one for all its connections (WAIT covers the writes of the
// connection it runs on, hence the INCR). N concurrent writes therefore
// cost far fewer than N WAITs, and a lone write one round trip.
//
// On a single node or a Sentinel-managed primary (*redis.Client, and any
// other non-Cluster client) there is one primary and the counter is
// cp:ack. On a Redis Cluster (*redis.ClusterClient) the primary is the one
// that owns the written key's slot (MasterForKey), the round runs on that
// node's own client and INCRs keyspace.AckFor(key), which hashes to the
// same slot: a round there confirms that primary's writes only, so rounds
// are grouped per primary. Safe for concurrent use; a goroutine runs per
// primary only while a round is under way.
type Acknowledger struct {
	opts     Options
	cluster  *redis.ClusterClient
	single   *primary
	mu       sync.Mutex
	nodes    map[string]*primary // Cluster primaries by address
	verified atomic.Bool
}

// primary groups the rounds of one Redis primary.
type primary struct {
	a    *Acknowledger
	rdb  redis.Cmdable
	mu   sync.Mutex
	busy bool
	next *round
}

// round is one WAIT and the Acks it answers; key is the counter it INCRs.
type round struct {
	key  string
	done chan struct{}
	err  error
}

// New returns an Acknowledger on client: per primary of a
// *redis.ClusterClient, else on client's one primary. It does not contact
// Redis (see CheckVersion).
func New(client redis.UniversalClient, opts Options) *Acknowledger {
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	opts.Timeout = max(opts.Timeout, time.Millisecond)
	a := &Acknowledger{opts: opts}
	if cc, ok := client.(*redis.ClusterClient); ok {
		a.cluster, a.nodes = cc, map[string]*primary{}
	} else {
		a.single = &primary{a: a, rdb: client}
	}
	return a
}

// Ack returns once a round that started after Ack was called confirmed the
// writes of key's primary, so every write to that primary the caller saw
// succeed before calling Ack, key's among them. key is the written key (on
// a single node or Sentinel only its primary matters, and any key will
// do). Errors: policy.ErrNotDurable (fewer replicas confirmed within the
// timeout, Redis failed or the Cluster does not know key's primary, or ctx
// ended first; the writes may exist), *VersionError (AOF on a Redis older
// than 7.2).
func (a *Acknowledger) Ack(ctx context.Context, key string) error {
	p, counter, err := a.primaryOf(ctx, key)
	if err != nil {
		return fmt.Errorf("durable: acknowledge: %w: %w", policy.ErrNotDurable, err)
	}
	p.mu.Lock()
	if p.next == nil {
		p.next = &round{key: counter, done: make(chan struct{})}
	}
	r := p.next
	if !p.busy {
		p.busy, p.next = true, nil
		go p.run(r)
	}
	p.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("durable: acknowledge: %w: %w", policy.ErrNotDurable, ctx.Err())
	}
}

// primaryOf returns the primary that owns key and the counter a round
// there INCRs.
func (a *Acknowledger) primaryOf(ctx context.Context, key string) (*primary, string, error) {
	if a.cluster == nil {
		return a.single, keyspace.Ack, nil
	}
	node, err := a.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, "", err
	}
	addr := node.Options().Addr
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.nodes[addr]
	if p == nil {
		p = &primary{a: a, rdb: node}
		a.nodes[addr] = p
	}
	return p, keyspace.AckFor(key), nil
}

// run runs round r, then the round that gathered while r was at Redis,
// until none did.
func (p *primary) run(r *round) {
	for r != nil {
		r.err = p.a.round(p.rdb, r.key)
		close(r.done)
		p.mu.Lock()
		r, p.next = p.next, nil
		p.busy = r != nil
		p.mu.Unlock()
	}
}

// round is one INCR counter + WAIT (or WAITAOF) pipeline on rdb. It is
// bounded by the timeout plus a second for the network, whatever its
// callers' contexts.
func (a *Acknowledger) round(rdb redis.Cmdable, counter string) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.Timeout+time.Second)
	defer cancel()
	if a.opts.AOF && !a.verified.Load() {
		if err := a.CheckVersion(ctx); err != nil {
			var ve *VersionError
			if errors.As(err, &ve) {
				return err
			}
			return fmt.Errorf("durable: acknowledge: %w: %w", policy.ErrNotDurable, err)
		}
	}
	ms := a.opts.Timeout.Milliseconds()
	var reply *redis.Cmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, counter)
		if a.opts.AOF {
			reply = p.Do(ctx, "waitaof", 1, a.opts.Replicas, ms)
		} else {
			reply = p.Do(ctx, "wait", a.opts.Replicas, ms)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("durable: acknowledge: %w: %w", policy.ErrNotDurable, err)
	}
	if a.opts.AOF {
		v, _ := reply.Int64Slice()
		if len(v) != 2 || v[0] < 1 || v[1] < int64(a.opts.Replicas) {
			return fmt.Errorf("durable: acknowledge: %w: WAITAOF answered %v within %s", policy.ErrNotDurable, v, a.opts.Timeout)
		}
		return nil
	}
	if n, _ := reply.Int64(); n < int64(a.opts.Replicas) {
		return fmt.Errorf("durable: acknowledge: %w: %d of %d replicas within %s", policy.ErrNotDurable, n,
			a.opts.Replicas, a.opts.Timeout)
	}
	return nil
}

// VersionError is a Redis too old for the durability asked for: WAITAOF
// (durability fsync) needs Redis 7.2 or later.
type VersionError struct {
	// Found is the redis_version Redis reported.
	Found string
}

func (e *VersionError) Error() string {
	return "redis.durability fsync needs Redis 7.2 or later (WAITAOF); this Redis is " + e.Found
}

// CheckVersion confirms, for AOF, that Redis — every primary of a Cluster —
// is 7.2 or later (INFO server, redis_version; Valkey reports 7.2.4 there);
// without AOF it does nothing. One round trip per primary. Errors:
// *VersionError, or the Redis error.
func (a *Acknowledger) CheckVersion(ctx context.Context) error {
	if !a.opts.AOF || a.verified.Load() {
		return nil
	}
	check := func(ctx context.Context, c redis.Cmdable) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		if v := infoField(info, "redis_version"); !atLeast(v, 7, 2) {
			return &VersionError{Found: v}
		}
		return nil
	}
	var err error
	if a.cluster != nil {
		err = a.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return check(ctx, c) })
	} else {
		err = check(ctx, a.single.rdb)
	}
	if err != nil {
		return err
	}
	a.verified.Store(true)
	return nil
}

// infoField is the value of field in an INFO reply ("" when absent).
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// atLeast reports whether version "X.Y.Z" is at least major.minor.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	x, err1 := strconv.Atoi(parts[0])
	y, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return x > major || (x == major && y >= minor)
}
