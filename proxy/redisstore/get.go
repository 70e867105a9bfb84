package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

// Get returns the callout with id (SPEC §4 GET /v1/callouts/{id}; the
// caller checks the issuer). A waiting callout is reported Held while its
// endpoint's gate is shut and Scheduled otherwise, whatever the record says
// (the gate, not the record, is what holds it back: the record keeps the
// state it had when it last moved). One pipelined round trip, two for a
// waiting callout. Errors: ErrNotFound (also
// for a malformed id), ErrUnavailable.
func (s *Store) Get(ctx context.Context, id string) (*policy.Callout, error) {
	key, ok := calloutKeyOfID(id)
	if !ok {
		return nil, fmt.Errorf("redisstore: get %q: %w", id, policy.ErrNotFound)
	}
	var h *redis.MapStringStringCmd
	var b, l, r *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		pk := partKeys(key)
		h = p.HGetAll(ctx, pk[0])
		b, l, r = p.Get(ctx, pk[1]), p.Get(ctx, pk[2]), p.Get(ctx, pk[3])
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.wrap("get", err)
	}
	m := h.Val()
	if len(m) == 0 || m[fState] == "" {
		return nil, fmt.Errorf("redisstore: get %s: %w", id, policy.ErrNotFound)
	}
	parts := storedParts{hash: m, log: l.Val(), resp: r.Val()}
	if b.Err() == nil {
		parts.body = []byte(b.Val())
	}
	c, err := decodeCallout(parts)
	if err != nil {
		return nil, err
	}
	if c.ID == "" {
		c.ID = id
	}
	if c.State == policy.Scheduled || c.State == policy.Held {
		g, _, err := s.gate(ctx, c.Endpoint, s.now())
		if err != nil {
			return nil, err
		}
		c.State = policy.Scheduled
		if g.Shut() {
			c.State = policy.Held
		}
	}
	return c, nil
}
