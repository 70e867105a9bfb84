package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Get returns the callout with id (contract §4 GET /v1/callouts/{id}; the
// caller checks the issuer). A waiting callout is reported Held while its
// endpoint's gate is shut and Scheduled otherwise, whatever the record says (the
// gate, not the record, is what holds it back: the record keeps the state it
// had when it last moved). One pipelined round trip (HGETALL and the long
// response), two when the request lives in a key of its own (:q), and one
// more for a waiting callout (its due time, and the gate unless this
// replica's gate cache has it). Errors: ErrNotFound (also for a malformed
// id), ErrUnavailable.
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

// waiting sets a waiting callout's state from its endpoint's gate, and its
// next attempt time from its due set (the record does not keep it), in one
// pipelined round trip.
func (s *Store) waiting(ctx context.Context, c *policy.Callout) error {
	var due *redis.FloatCmd
	var gc *gateview.Pending
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		// its organisation queue and breaker partition (contract §6)
		q, ok := s.calloutQueue(c.Endpoint, c.Issuer, c.ID)
		gc = s.gates.Queue(ctx, p, c.Endpoint, q.Part)
		if ok {
			due = p.ZScore(ctx, q.Due, c.ID)
		}
		return nil
	})
	// a script Redis did not have (NOSCRIPT, or "Function not found" after a
	// FUNCTION FLUSH) did not run: gc.Result runs it again
	if err != nil && !errors.Is(err, redis.Nil) && !script.Missing(err) {
		return s.wrap("get", err)
	}
	v, err := gc.Result(ctx)
	if err != nil {
		return err
	}
	g := v.Gate
	if due != nil && due.Err() == nil {
		c.NextAttemptAt = time.UnixMilli(int64(due.Val()))
	}
	c.State = policy.Scheduled
	if g.Shut() {
		c.State = policy.Held
	}
	return nil
}
