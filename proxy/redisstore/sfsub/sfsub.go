// Package sfsub keeps the Redis state of the proxy's Salesforce Pub/Sub API
// subscription: which replica subscribes to a topic (a lease renewed by its
// holder), the replay id after the last batch of events it handled, and
// the reprocess requests it deferred (looked at again later by whichever
// replica then holds the lease, so a failover loses none). The keys,
// cp:{sfsub}:lease:{topic}, cp:{sfsub}:replay:{topic} and
// cp:{sfsub}:again:{topic}, are named and documented in
// proxy/redisstore/keyspace; they share one hash tag, so the script that
// stores a replay id under the lease works on Redis Cluster.
package sfsub

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
)

//go:embed lua/*.lua
var luaFS embed.FS

type holdArgs struct {
	Lease string        `lua:"lease,key"`
	Owner string        `lua:"owner"`
	TTL   time.Duration `lua:"ttl"`
}

type releaseArgs struct {
	Lease string `lua:"lease,key"`
	Owner string `lua:"owner"`
}

type saveArgs struct {
	Lease  string `lua:"lease,key"`
	Replay string `lua:"replay,key"`
	Owner  string `lua:"owner"`
	ID     []byte `lua:"id"`
}

type dueArgs struct {
	Again string        `lua:"again,key"`
	Now   int64         `lua:"now"`
	Lease time.Duration `lua:"lease"`
	Limit int           `lua:"limit"`
}

type deferArgs struct {
	Again string        `lua:"again,key"`
	Now   int64         `lua:"now"`
	After time.Duration `lua:"after"`
	IDs   []string      `lua:"ids"`
}

type idsReply struct {
	IDs []string `lua:"ids"`
}

type countReply struct {
	N int64 `lua:"n"`
}

// State is the subscription state of one topic (a Pub/Sub API topic name,
// e.g. /data/Failed_Callout__ChangeEvent). Make it with New; safe for
// concurrent use.
type State struct {
	rdb     redis.UniversalClient
	lease   string
	replay  string
	again   string
	due     *script.Script[dueArgs, idsReply]
	defer_  *script.Script[deferArgs, countReply]
	pinned  func() time.Time // PinScriptTime; nil: Redis's clock
	hold    *script.Script[holdArgs, countReply]
	release *script.Script[releaseArgs, countReply]
	save    *script.Script[saveArgs, countReply]
}

// New returns the state of the subscription to topic in rdb, its scripts
// registered with scripts, the script layer of rdb (the store's
// redisstore.Store.Scripts; nil: a script.Functions of its own on rdb).
// Errors: a script that does not load (a build defect).
func New(rdb redis.UniversalClient, topic string, scripts *script.Functions) (*State, error) {
	s := &State{rdb: rdb, lease: keyspace.SFSubLease(topic), replay: keyspace.SFSubReplay(topic),
		again: keyspace.SFSubAgain(topic)}
	if scripts == nil {
		scripts = script.Attach(rdb, nil)
	}
	plain := script.Package{FS: luaFS, Functions: scripts}
	clocked := script.Package{FS: luaFS, Prelude: []string{script.Clock}, Functions: scripts}
	if err := errors.Join(
		script.LoadInto(&s.hold, plain, "hold"),
		script.LoadInto(&s.release, plain, "release"),
		script.LoadInto(&s.save, plain, "save"),
		script.LoadInto(&s.due, clocked, "due"),
		script.LoadInto(&s.defer_, clocked, "defer"),
	); err != nil {
		return nil, fmt.Errorf("sfsub: %w", err)
	}
	return s, nil
}

// Hold takes, or renews when owner already holds it, the subscriber lease
// for ttl, and reports whether owner holds it. One round trip. Errors:
// policy.ErrUnavailable (script.Wrap).
func (s *State) Hold(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	r, err := s.hold.Run(ctx, s.rdb, &holdArgs{Lease: s.lease, Owner: owner, TTL: ttl})
	return r.N == 1, script.Wrap("sfsub: hold", err)
}

// Release gives the lease back when owner holds it. Errors:
// policy.ErrUnavailable.
func (s *State) Release(ctx context.Context, owner string) error {
	_, err := s.release.Run(ctx, s.rdb, &releaseArgs{Lease: s.lease, Owner: owner})
	return script.Wrap("sfsub: release", err)
}

// ReplayID returns the stored replay id; nil when none was stored (a first
// subscription, or one forgotten with ForgetReplayID). Errors:
// policy.ErrUnavailable.
func (s *State) ReplayID(ctx context.Context) ([]byte, error) {
	v, err := s.rdb.Get(ctx, s.replay).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, script.Wrap("sfsub: replay id", err)
}

// SaveReplayID stores id as the replay id after the last batch handled,
// only while owner holds the lease; it reports whether it did. Errors:
// policy.ErrUnavailable.
func (s *State) SaveReplayID(ctx context.Context, owner string, id []byte) (bool, error) {
	r, err := s.save.Run(ctx, s.rdb, &saveArgs{Lease: s.lease, Replay: s.replay, Owner: owner, ID: id})
	return r.N == 1, script.Wrap("sfsub: save replay id", err)
}

// ForgetReplayID deletes the stored replay id, after Salesforce refused it
// as invalid or outside its retention window: the next subscription starts
// at the latest event. Errors: policy.ErrUnavailable.
func (s *State) ForgetReplayID(ctx context.Context) error {
	return script.Wrap("sfsub: forget replay id", s.rdb.Del(ctx, s.replay).Err())
}

// Held reports whether a replica holds the subscriber lease (a replica
// with the subscription off leaves the polls to it). One round trip.
// Errors: policy.ErrUnavailable.
func (s *State) Held(ctx context.Context) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.lease).Result()
	return n == 1, script.Wrap("sfsub: held", err)
}

// PinScriptTime, for tests that travel in time only, makes the scripts
// take now() as their now instead of Redis's clock (TIME). Never in
// production: a pinned clock is a replica's skew (contract §1). Call it
// before the State is used.
func (s *State) PinScriptTime(now func() time.Time) { s.pinned = now }

// clockArg is a script's now argument: 0 (Redis's clock, script.Clock) or
// the pinned test time in Unix ms.
func (s *State) clockArg() int64 {
	if s.pinned == nil {
		return 0
	}
	return s.pinned().UnixMilli()
}

// Defer notes record ids (Salesforce record Ids) as reprocess requests to
// look at again after (ms precision) from now on Redis's clock, the one
// clock of shared state (contract §1): replicas pass durations, never
// instants. An id noted already gets the new time. One round trip.
// Errors: policy.ErrUnavailable.
func (s *State) Defer(ctx context.Context, ids []string, after time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.defer_.Run(ctx, s.rdb, &deferArgs{Again: s.again, Now: s.clockArg(), After: max(after, 0), IDs: ids})
	return script.Wrap("sfsub: defer", err)
}

// Due takes up to limit of the deferred ids whose time came on Redis's
// clock, oldest first, and moves each lease ahead: the caller looks at
// them and then calls Done with those it settled (or Defer with a new
// time); a caller that dies meanwhile leaves them due again a lease
// later. One round trip. Errors: policy.ErrUnavailable.
func (s *State) Due(ctx context.Context, lease time.Duration, limit int) ([]string, error) {
	r, err := s.due.Run(ctx, s.rdb, &dueArgs{Again: s.again, Now: s.clockArg(), Lease: lease, Limit: max(limit, 1)})
	return r.IDs, script.Wrap("sfsub: due", err)
}

// Done forgets deferred ids. One round trip. Errors:
// policy.ErrUnavailable.
func (s *State) Done(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	return script.Wrap("sfsub: done", s.rdb.ZRem(ctx, s.again, members...).Err())
}
