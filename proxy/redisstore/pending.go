package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// KeyHolder returns the id of the callout that holds the Idempotency-Key
// key of issuer on endpoint (its reservation, keyspace; contract §5: the
// scope is issuer, endpoint, key; key without sf-string quotes, as
// stored). Errors: policy.ErrNotFound when no callout holds it (never
// used, or its retention ended), ErrUnavailable.
func (s *Store) KeyHolder(ctx context.Context, issuer, endpoint, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("redisstore: key holder: empty key: %w", policy.ErrNotFound)
	}
	n := s.shards(endpoint)
	q := keyspace.QueueAt(endpoint, keyspace.QueueShards(endpoint, n)[keyspace.KeyQueue(endpoint, issuer, key, n)])
	v, err := s.rdb.Get(ctx, q.Reservation(issuer, key)).Result()
	if err == nil && len(v) >= 16 {
		return keyspace.IDOfRaw(q.Shard, v[:16]), nil
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", s.wrap("key holder", err)
	}
	return "", fmt.Errorf("redisstore: key holder %s: %w", endpoint, policy.ErrNotFound)
}
