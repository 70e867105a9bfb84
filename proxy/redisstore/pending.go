package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
)

// MaxPendingPage bounds one page of Pending.
const MaxPendingPage = 1000

// Pending lists one page of endpoint's pending callouts in state (SPEC §4:
// scheduled, held or in_flight), from offset, at most limit (1 to
// MaxPendingPage): in_flight ones from the lease set, soonest lease expiry
// first; scheduled and held ones from the due set, soonest due first. The
// due set holds both: its callouts are held while the endpoint's gate is
// shut and scheduled otherwise, as Get reports them, so one of those two
// states lists them all and the other none. Each callout has its record's
// fields and headers, without body, attempt log or response. next is the
// offset of the following page, 0 after the last. Errors:
// ErrUnavailable; an unknown state or a limit out of range is an error.
func (s *Store) Pending(ctx context.Context, endpoint string, state policy.State, offset, limit int) (
	page []*policy.Callout, next int, err error) {
	if limit < 1 || limit > MaxPendingPage || offset < 0 {
		return nil, 0, fmt.Errorf("redisstore: pending: limit %d not 1–%d or offset %d negative", limit, MaxPendingPage, offset)
	}
	k := keysOf(endpoint)
	set := k.due
	switch state {
	case policy.InFlight:
		set = k.lease
	case policy.Scheduled, policy.Held:
		g, _, err := s.gate(ctx, endpoint, s.now())
		if err != nil {
			return nil, 0, err
		}
		if g.Shut() != (state == policy.Held) {
			return []*policy.Callout{}, 0, nil
		}
	default:
		return nil, 0, fmt.Errorf("redisstore: pending: state %q is not scheduled, held or in_flight", state)
	}
	ids, err := s.rdb.ZRange(ctx, set, int64(offset), int64(offset+limit)).Result() // one more: is there a next page?
	if err != nil {
		return nil, 0, s.wrap("pending", err)
	}
	if len(ids) > limit {
		ids, next = ids[:limit], offset+limit
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, k.callout(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, s.wrap("pending", err)
	}
	page = make([]*policy.Callout, 0, len(ids))
	for i, id := range ids {
		m := cmds[i].Val()
		if len(m) == 0 || m[fState] == "" {
			continue // ended between the two reads
		}
		c, err := decodeCallout(storedParts{hash: m})
		if err != nil {
			return nil, 0, err
		}
		if c.ID == "" {
			c.ID = id
		}
		c.State = state
		page = append(page, c)
	}
	return page, next, nil
}

// KeyHolder returns the id of the callout that holds the Idempotency-Key
// key of issuer on endpoint (SPEC §5: the scope is issuer, endpoint, key;
// key without sf-string quotes, as stored). Errors: policy.ErrNotFound
// when no callout holds it (never used, or its retention ended),
// ErrUnavailable.
func (s *Store) KeyHolder(ctx context.Context, issuer, endpoint, key string) (string, error) {
	ik := keysOf(endpoint).idem(issuer, key)
	if ik == "" {
		return "", fmt.Errorf("redisstore: key holder: empty key: %w", policy.ErrNotFound)
	}
	id, err := s.rdb.HGet(ctx, ik, "id").Result()
	if errors.Is(err, redis.Nil) || (err == nil && id == "") {
		return "", fmt.Errorf("redisstore: key holder %s: %w", endpoint, policy.ErrNotFound)
	}
	if err != nil {
		return "", s.wrap("key holder", err)
	}
	return id, nil
}
