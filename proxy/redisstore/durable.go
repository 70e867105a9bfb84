package redisstore

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

// ackKey is cp:ack (keyspace), which every acknowledgement round
// increments before its WAIT or WAITAOF, so the round's connection has a
// write of its own at the primary's replication offset (WAIT covers the
// writes of the connection it runs on).
const ackKey = keyspace.Ack

// AckOptions configures an Acknowledger (config redis.durability,
// contract §11).
type AckOptions struct {
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
// groups: every Ack that arrives while a round is at Redis joins the next
// round, and one round — a pipeline of INCR cp:ack and WAIT (or WAITAOF) on
// one connection — confirms everything the primary executed before it,
// because a node's replication offset is one for all its connections. N
// concurrent writes therefore cost far fewer than N WAITs, and a lone write
// one round trip. Safe for concurrent use; it runs a goroutine only while a
// round is under way. For a single node or a Sentinel-managed primary
// (*redis.Client); a Cluster is refused (a WAIT covers one primary only).
type Acknowledger struct {
	rdb      redis.UniversalClient
	opts     AckOptions
	mu       sync.Mutex
	busy     bool
	next     *ackRound
	verified atomic.Bool
}

// ackRound is one WAIT and the Acks it answers.
type ackRound struct {
	done chan struct{}
	err  error
}

// NewAcknowledger returns an Acknowledger on client. Errors: client is a
// Redis Cluster.
func NewAcknowledger(client redis.UniversalClient, opts AckOptions) (*Acknowledger, error) {
	if _, ok := client.(*redis.ClusterClient); ok {
		return nil, errors.New("redisstore: durable acknowledgements are not supported on a Redis Cluster")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	opts.Timeout = max(opts.Timeout, time.Millisecond)
	return &Acknowledger{rdb: client, opts: opts}, nil
}

// Ack returns once a round that started after Ack was called confirmed the
// primary's writes, so every write the caller saw succeed before calling
// Ack. Errors: policy.ErrNotDurable (fewer replicas confirmed within the
// timeout, Redis failed, or ctx ended first; the writes may exist),
// *VersionError (AOF on a Redis older than 7.2).
func (a *Acknowledger) Ack(ctx context.Context) error {
	a.mu.Lock()
	if a.next == nil {
		a.next = &ackRound{done: make(chan struct{})}
	}
	r := a.next
	if !a.busy {
		a.busy, a.next = true, nil
		go a.run(r)
	}
	a.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("redisstore: acknowledge: %w: %w", policy.ErrNotDurable, ctx.Err())
	}
}

// run runs round r, then the round that gathered while r was at Redis,
// until none did.
func (a *Acknowledger) run(r *ackRound) {
	for r != nil {
		r.err = a.round()
		close(r.done)
		a.mu.Lock()
		r, a.next = a.next, nil
		a.busy = r != nil
		a.mu.Unlock()
	}
}

// round is one INCR + WAIT (or WAITAOF) pipeline. It is bounded by the
// timeout plus a second for the network, whatever its callers' contexts.
func (a *Acknowledger) round() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.Timeout+time.Second)
	defer cancel()
	if a.opts.AOF && !a.verified.Load() {
		if err := a.CheckVersion(ctx); err != nil {
			var ve *VersionError
			if errors.As(err, &ve) {
				return err
			}
			return fmt.Errorf("redisstore: acknowledge: %w: %w", policy.ErrNotDurable, err)
		}
	}
	ms := a.opts.Timeout.Milliseconds()
	var reply *redis.Cmd
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, ackKey)
		if a.opts.AOF {
			reply = p.Do(ctx, "waitaof", 1, a.opts.Replicas, ms)
		} else {
			reply = p.Do(ctx, "wait", a.opts.Replicas, ms)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: acknowledge: %w: %w", policy.ErrNotDurable, err)
	}
	if a.opts.AOF {
		v, _ := reply.Int64Slice()
		if len(v) != 2 || v[0] < 1 || v[1] < int64(a.opts.Replicas) {
			return fmt.Errorf("redisstore: acknowledge: %w: WAITAOF answered %v within %s", policy.ErrNotDurable, v, a.opts.Timeout)
		}
		return nil
	}
	if n, _ := reply.Int64(); n < int64(a.opts.Replicas) {
		return fmt.Errorf("redisstore: acknowledge: %w: %d of %d replicas within %s", policy.ErrNotDurable, n,
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

// CheckVersion confirms, for AOF, that Redis is 7.2 or later (INFO server,
// redis_version); without AOF it does nothing. One round trip. Errors:
// *VersionError, or the Redis error.
func (a *Acknowledger) CheckVersion(ctx context.Context) error {
	if !a.opts.AOF || a.verified.Load() {
		return nil
	}
	info, err := a.rdb.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	v := infoField(info, "redis_version")
	if !atLeast(v, 7, 2) {
		return &VersionError{Found: v}
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
