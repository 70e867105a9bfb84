package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
)

// MaxPendingPage bounds one page of Pending.
const MaxPendingPage = 1000

// Pending lists one page of endpoint's pending callouts in state (contract §4:
// scheduled, held or in_flight), from offset, at most limit (1 to
// MaxPendingPage): in_flight ones from the lease set, soonest lease expiry
// first; scheduled and held ones from the due sets, soonest due first. A
// due set holds both: an organisation queue's callouts are held while the
// gate of its breaker partition (contract §6) is shut and scheduled
// otherwise, as Get reports them, so of those two states one lists each
// queue's and the other none of them. Each callout has its record's
// fields and headers, without body, attempt log or response. next is the
// offset of the following page, 0 after the last. Errors:
// ErrUnavailable; an unknown state or a limit out of range is an error.
func (s *Store) Pending(ctx context.Context, endpoint string, state policy.State, offset, limit int) (
	page []*policy.Callout, next int, err error) {
	if limit < 1 || limit > MaxPendingPage || offset < 0 {
		return nil, 0, fmt.Errorf("redisstore: pending: limit %d not 1–%d or offset %d negative", limit, MaxPendingPage, offset)
	}
	qs, err := s.orgQueuesOf(ctx, endpoint, false)
	if err != nil {
		return nil, 0, err
	}
	type set struct {
		key, tag string
	}
	var sets []set
	for _, q := range qs {
		sets = append(sets, set{q.due, q.tag})
	}
	switch state {
	case policy.InFlight:
		sets = sets[:0]
		for _, q := range qs {
			sets = append(sets, set{q.lease, q.tag})
		}
	case policy.Scheduled, policy.Held:
		// each organisation queue's callouts are held by its breaker
		// partition's gate (contract §6), read once per partition
		sets = sets[:0]
		shut := map[string]bool{}
		for _, q := range qs {
			sh, ok := shut[q.part]
			if !ok {
				v, err := s.gateRead(ctx, endpoint, q.part, s.now())
				if err != nil {
					return nil, 0, err
				}
				sh = v.gate.Shut()
				shut[q.part] = sh
			}
			if sh == (state == policy.Held) {
				sets = append(sets, set{q.due, q.tag})
			}
		}
	default:
		return nil, 0, fmt.Errorf("redisstore: pending: state %q is not scheduled, held or in_flight", state)
	}
	// Every set's first offset+limit+1 entries, merged by score (every
	// queue, keyspace): one more than the page says
	// whether there is a next page.
	zs := make([]*redis.ZSliceCmd, len(sets))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range sets {
			zs[i] = p.ZRangeWithScores(ctx, st.key, 0, int64(offset+limit))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, s.wrap("pending", err)
	}
	type member struct {
		id, record string
		score      float64
	}
	var all []member
	for i, z := range zs {
		for _, m := range z.Val() {
			id := m.Member.(string)
			all = append(all, member{id, sets[i].tag + "c:" + id, m.Score})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score < all[j].score })
	if offset >= len(all) {
		return []*policy.Callout{}, 0, nil
	}
	all = all[offset:]
	if len(all) > limit {
		all, next = all[:limit], offset+limit
	}
	cmds := make([]*redis.MapStringStringCmd, len(all))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range all {
			cmds[i] = p.HGetAll(ctx, m.record)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, s.wrap("pending", err)
	}
	page = make([]*policy.Callout, 0, len(all))
	for i, m := range all {
		c, err := s.decode(ctx, m.id, cmds[i].Val(), "", "")
		if errors.Is(err, policy.ErrNotFound) {
			continue // ended between the two reads
		}
		if err != nil {
			return nil, 0, err
		}
		c.Body, c.AttemptLog, c.Response, c.Fingerprint = nil, nil, nil, ""
		c.State = state
		// The set's score is the due time (lease expiry in flight): the
		// record does not keep it (keyspace).
		if at := time.UnixMilli(int64(m.score)); state == policy.InFlight {
			c.LeaseExpiresAt = at
		} else {
			c.NextAttemptAt = at
		}
		page = append(page, c)
	}
	return page, next, nil
}

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
	q := queueAt(endpoint, queueShards(endpoint, n)[keyQueue(endpoint, issuer, key, n)])
	v, err := s.rdb.Get(ctx, q.reservation(issuer, key)).Result()
	if err == nil && len(v) >= 16 {
		return idOfRaw(q.shard, v[:16]), nil
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", s.wrap("key holder", err)
	}
	return "", fmt.Errorf("redisstore: key holder %s: %w", endpoint, policy.ErrNotFound)
}
