// Package inspect answers the admin API's questions about one callout that
// the core store (proxy/redisstore) does not need for its own work: which
// callout holds an Idempotency-Key (contract §5; docs/admin.md "Searching
// callouts"). It only reads, and derives every key from keyspace; the core
// tells it what the configuration decides (Core).
package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Core is what a Reader needs of the core store. *redisstore.Store
// implements it.
type Core interface {
	// Shards returns the configured shard count of endpoint (shards: N,
	// 1 … keyspace.Shards): how many queues its keyed callouts spread over.
	Shards(endpoint string) int
}

// Reader reads callouts on one Redis. It is safe for concurrent use.
type Reader struct {
	rdb  redis.UniversalClient
	core Core
}

// New returns a Reader of the callouts on rdb, laid out as core says.
func New(rdb redis.UniversalClient, core Core) *Reader { return &Reader{rdb: rdb, core: core} }

// KeyHolder returns the id of the callout that holds the Idempotency-Key
// key of issuer on endpoint (its reservation, keyspace; contract §5: the
// scope is issuer, endpoint, key; key without sf-string quotes, as
// stored). One GET. Errors: policy.ErrNotFound when no callout holds it
// (never used, or its retention ended), policy.ErrUnavailable.
func (r *Reader) KeyHolder(ctx context.Context, issuer, endpoint, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("redisstore: key holder: empty key: %w", policy.ErrNotFound)
	}
	q := keyspace.KeyedQueue(endpoint, issuer, key, r.core.Shards(endpoint))
	v, err := r.rdb.Get(ctx, q.Reservation(issuer, key)).Result()
	if err == nil && len(v) >= 16 {
		return keyspace.IDOfRaw(q.Shard, v[:16]), nil
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", script.Wrap("redisstore: key holder", err)
	}
	return "", fmt.Errorf("redisstore: key holder %s: %w", endpoint, policy.ErrNotFound)
}
