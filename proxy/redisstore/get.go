package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/redis/go-redis/v9"
)

// Get returns the callout with id (contract §4 GET /v1/callouts/{id}; the
// caller checks the issuer), in the state its record keeps: a waiting
// callout is held from the moment its gate shut (hold/lua/park.lua holds those
// waiting then, create.lua, complete.lua and reap.lua those that meet it
// shut) until a dispatcher claims it or an admin releases it. One pipelined
// round trip (HGETALL and the long response), two when the request lives
// in a key of its own (:q), and one more for a waiting callout (its due
// time). Errors: ErrNotFound (also for a malformed id), ErrUnavailable.
func (s *Store) Get(ctx context.Context, id string) (*policy.Callout, error) {
	key, ok := keyspace.Callout(id)
	if !ok {
		return nil, fmt.Errorf("redisstore: get %q: %w", id, policy.ErrNotFound)
	}
	var h *redis.MapStringStringCmd
	var r *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		h, r = p.HGetAll(ctx, key), p.Get(ctx, key+":r")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.wrap("get", err)
	}
	m := h.Val()
	rest := ""
	if m[record.FieldState] != "" && m[record.FieldRestInQ] == "1" {
		// the long headers and body, in a key of their own
		v, err := s.rdb.Get(ctx, key+":q").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, s.wrap("get", err)
		}
		rest = v
	}
	c, err := s.decode(ctx, id, m, rest, r.Val())
	if err != nil {
		return nil, err
	}
	if c.State == policy.Scheduled || c.State == policy.Held {
		if err := s.waiting(ctx, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// decode decodes record m of callout id with its :q (rest) and :r (resp)
// when they were read ("" otherwise). ErrNotFound when m is no record.
func (s *Store) decode(ctx context.Context, id string, m map[string]string, rest, resp string) (*policy.Callout, error) {
	if m[record.FieldState] == "" {
		return nil, fmt.Errorf("redisstore: get %s: %w", id, policy.ErrNotFound)
	}
	c, err := record.Decode(id, m, rest, func(tag string) string { return s.issuers.Of(ctx, tag) })
	if err != nil {
		return nil, err
	}
	if inline := record.InlineResponse(m); inline != "" {
		resp = inline
	}
	if resp != "" && m[record.FieldStatus] != "" {
		if c.Response, err = record.DecodeResponse(resp); err != nil {
			return nil, fmt.Errorf("redisstore: callout %s: response: %w", id, err)
		}
	}
	return c, nil
}

// waiting sets a waiting callout's next attempt time from its due set
// (the record does not keep it): one round trip.
func (s *Store) waiting(ctx context.Context, c *policy.Callout) error {
	q, ok := s.calloutQueue(c.Endpoint, c.Issuer, c.ID)
	if !ok {
		return nil
	}
	due, err := s.rdb.ZScore(ctx, q.Due, c.ID).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return s.wrap("get", err)
	}
	c.NextAttemptAt = time.UnixMilli(int64(due))
	return nil
}
