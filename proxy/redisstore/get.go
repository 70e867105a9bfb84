package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

// Get returns the callout with id (contract §4 GET /v1/callouts/{id}; the
// caller checks the issuer), whichever layout its record has (keys.go). A
// waiting callout is reported Held while its endpoint's gate is shut and
// Scheduled otherwise, whatever the record says (the gate, not the record,
// is what holds it back: the record keeps the state it had when it last
// moved). One pipelined round trip (HGETALL and the long response), two
// when the request lives in a key of its own (a long layout-2 one, any
// legacy one), and one more for a waiting callout (its due time, and the
// gate unless this replica's gate cache has it). Errors: ErrNotFound (also for a
// malformed id), ErrUnavailable.
func (s *Store) Get(ctx context.Context, id string) (*policy.Callout, error) {
	key, ok := calloutKeyOfID(id)
	if !ok {
		return nil, fmt.Errorf("redisstore: get %q: %w", id, policy.ErrNotFound)
	}
	var h *redis.MapStringStringCmd
	var r *redis.StringCmd
	pk := partKeys(key)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		h, r = p.HGetAll(ctx, pk[0]), p.Get(ctx, pk[3])
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.wrap("get", err)
	}
	m := h.Val()
	// The parts that may live in keys of their own: a layout-2 record's
	// long headers and body (:q), a legacy record's body and attempt log.
	var more []*redis.StringCmd
	switch {
	case m[f2State] != "" && m[f2RestInQ] == "1":
		more = []*redis.StringCmd{s.rdb.Get(ctx, key+":q")}
	case m[f2State] == "" && m[fState] != "":
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			more = []*redis.StringCmd{p.Get(ctx, pk[1]), p.Get(ctx, pk[2])}
			return nil
		})
	}
	for _, c := range more {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, s.wrap("get", err)
		}
	}
	rest := ""
	if len(more) == 1 {
		rest = more[0].Val()
	}
	c, err := s.decodeAny(ctx, id, m, func() storedParts {
		parts := storedParts{log: more[1].Val(), resp: r.Val()}
		if more[0].Err() == nil {
			parts.body = []byte(more[0].Val())
		}
		return parts
	}, rest, r.Val())
	if err != nil {
		return nil, err
	}
	if c.State == policy.Scheduled || c.State == policy.Held {
		if err := s.waiting(ctx, c, m[f2State] != ""); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// decodeAny decodes a record of either layout: m its hash, legacy its
// other parts in layout 1, rest and resp its :q and :r in layout 2.
// ErrNotFound when m is no record.
func (s *Store) decodeAny(ctx context.Context, id string, m map[string]string, legacy func() storedParts,
	rest, resp string) (*policy.Callout, error) {
	if m[f2State] != "" {
		c, err := decodeRecord2(id, m, rest, func(tag string) string { return s.issuerOf(ctx, tag) })
		if err != nil {
			return nil, err
		}
		if inline := joinChunks(m, respField); inline != "" {
			resp = inline
		}
		if resp != "" && m[f2Status] != "" {
			if c.Response, err = decodeResponse(resp); err != nil {
				return nil, fmt.Errorf("redisstore: callout %s: response: %w", id, err)
			}
		}
		return c, nil
	}
	if len(m) == 0 || m[fState] == "" {
		return nil, fmt.Errorf("redisstore: get %s: %w", id, policy.ErrNotFound)
	}
	parts := legacy()
	parts.hash = m
	c, err := decodeCallout(parts)
	if err != nil {
		return nil, err
	}
	if c.ID == "" {
		c.ID = id
	}
	return c, nil
}

// waiting sets a waiting callout's state from its endpoint's gate, and a
// layout-2 callout's next attempt time from its due set (layout 2 keeps it
// only there), in one pipelined round trip.
func (s *Store) waiting(ctx context.Context, c *policy.Callout, layout2 bool) error {
	if a, ok := s.CachedAdmission(c.Endpoint); ok {
		// the gate from this replica's gate cache (gatecache.go): only the
		// due time is read
		c.State = policy.Scheduled
		if a.Gate.Shut() {
			c.State = policy.Held
		}
		if q, ok := queueOfID(c.Endpoint, c.ID); ok && layout2 {
			if due, err := s.rdb.ZScore(ctx, q.due, c.ID).Result(); err == nil {
				c.NextAttemptAt = time.UnixMilli(int64(due))
			} else if !errors.Is(err, redis.Nil) {
				return s.wrap("get", err)
			}
		}
		return nil
	}
	var due *redis.FloatCmd
	gc := &scriptCall{sc: s.lua.gateRead, keys: []string{keysOf(c.Endpoint).ep}, args: []any{msArg(s.now())}}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		gc.queue(ctx, p)
		if q, ok := queueOfID(c.Endpoint, c.ID); ok && layout2 {
			due = p.ZScore(ctx, q.due, c.ID)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return s.wrap("get", err)
	}
	v, err := s.result(ctx, "gate_read", gc)
	if err != nil {
		return err
	}
	g, _, _, err := decodeGateRead(v)
	if err != nil {
		return err
	}
	if due != nil && due.Err() == nil {
		c.NextAttemptAt = time.UnixMilli(int64(due.Val()))
	}
	c.State = policy.Scheduled
	if g.Shut() {
		c.State = policy.Held
	}
	return nil
}
