// Package sfsub keeps the Redis state of the proxy's Salesforce Pub/Sub API
// subscription: which replica subscribes to a topic (a lease renewed by its
// holder) and the replay id after the last batch of events it handled. The
// keys, cp:{sfsub}:lease:{topic} and cp:{sfsub}:replay:{topic}, are named
// and documented in proxy/redisstore/keyspace; they share one hash tag, so
// the script that stores a replay id under the lease works on Redis
// Cluster.
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
	hold    *script.Script[holdArgs, countReply]
	release *script.Script[releaseArgs, countReply]
	save    *script.Script[saveArgs, countReply]
}

// New returns the state of the subscription to topic in rdb. Errors: a
// script that does not load (a build defect).
func New(rdb redis.UniversalClient, topic string) (*State, error) {
	s := &State{rdb: rdb, lease: keyspace.SFSubLease(topic), replay: keyspace.SFSubReplay(topic)}
	var err error
	if s.hold, err = script.Load[holdArgs, countReply](luaFS, "hold"); err != nil {
		return nil, fmt.Errorf("sfsub: %w", err)
	}
	if s.release, err = script.Load[releaseArgs, countReply](luaFS, "release"); err != nil {
		return nil, fmt.Errorf("sfsub: %w", err)
	}
	if s.save, err = script.Load[saveArgs, countReply](luaFS, "save"); err != nil {
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
