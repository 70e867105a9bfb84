package redisstore

import (
	"context"
	_ "embed" // the subscription's scripts
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Salesforce Pub/Sub API subscription's state (keys.go lists these
// keys by reference only). Both keys share the hash tag {pubsub}, so the
// script that stores a replay id under the lock works on Redis Cluster.
//
//	cp:{pubsub}:lock:{topic}    STRING the token of the replica that
//	                            subscribes to topic (one at a time); TTL:
//	                            the lock's, renewed by its holder, so
//	                            another replica takes over when it dies.
//	cp:{pubsub}:replay:{topic}  STRING the replay id (opaque bytes, as
//	                            FetchResponse gives it) after the last
//	                            batch of events the holder processed: a new
//	                            holder, or the same one after a restart,
//	                            subscribes with ReplayPreset CUSTOM after
//	                            it ("Pub/Sub API: Replaying an Event
//	                            Stream"). No TTL: Salesforce keeps events
//	                            72 hours, and an expired id is answered
//	                            with an error the subscriber handles.
//
// topic is the Pub/Sub API topic name, e.g. /data/Failed_Callout__ChangeEvent.

//go:embed lua/pubsub_hold.lua
var pubsubHoldLua string

//go:embed lua/pubsub_save.lua
var pubsubSaveLua string

//go:embed lua/pubsub_release.lua
var pubsubReleaseLua string

func pubsubLockKey(topic string) string   { return "cp:{pubsub}:lock:" + topic }
func pubsubReplayKey(topic string) string { return "cp:{pubsub}:replay:" + topic }

// PubSubState is the Redis state of one Pub/Sub API subscription: which
// replica subscribes (a lock renewed by its holder) and the replay id it
// processed last. Make it with NewPubSubState; safe for concurrent use.
type PubSubState struct {
	s                   *Store
	topic               string
	hold, save, release *redis.Script
}

// NewPubSubState returns the state of the subscription to topic in s's
// Redis.
func NewPubSubState(s *Store, topic string) *PubSubState {
	return &PubSubState{s: s, topic: topic, hold: redis.NewScript(pubsubHoldLua),
		save: redis.NewScript(pubsubSaveLua), release: redis.NewScript(pubsubReleaseLua)}
}

// Hold takes, or renews when owner already holds it, the subscriber lock
// for ttl, and reports whether owner holds it. One round trip. Errors:
// ErrUnavailable.
func (p *PubSubState) Hold(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	v, err := p.s.run(ctx, "pubsub hold", p.hold, []string{pubsubLockKey(p.topic)}, owner, durMs(ttl))
	if err != nil {
		return false, err
	}
	return replyInt(v) == 1, nil
}

// Release gives the lock back when owner holds it. Errors: ErrUnavailable.
func (p *PubSubState) Release(ctx context.Context, owner string) error {
	_, err := p.s.run(ctx, "pubsub release", p.release, []string{pubsubLockKey(p.topic)}, owner)
	return err
}

// ReplayID returns the stored replay id; nil when none was stored (a
// first subscription). Errors: ErrUnavailable.
func (p *PubSubState) ReplayID(ctx context.Context) ([]byte, error) {
	v, err := p.s.rdb.Get(ctx, pubsubReplayKey(p.topic)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, p.s.wrap("pubsub replay id", err)
}

// SaveReplayID stores id as the replay id after the last processed batch,
// only while owner holds the lock; it reports whether it did. Errors:
// ErrUnavailable.
func (p *PubSubState) SaveReplayID(ctx context.Context, owner string, id []byte) (bool, error) {
	v, err := p.s.run(ctx, "pubsub save replay id", p.save,
		[]string{pubsubLockKey(p.topic), pubsubReplayKey(p.topic)}, owner, id)
	if err != nil {
		return false, err
	}
	return replyInt(v) == 1, nil
}
