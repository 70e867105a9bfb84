// Package pending lists an endpoint's pending callouts for the admin API
// (contract §4 states scheduled, held and in_flight; docs/admin.md "GET
// /admin/v1/callouts"): the members of its queues' due and lease sets
// (keyspace "Shards and queues"), merged by due time or lease expiry, with
// their records. It only reads; the core store (proxy/redisstore) tells it
// where the sets are, whether a breaker partition's gate is shut, and how a
// record decodes (Core).
package pending

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Queue is one organisation queue's sets, as Core reports them: Due and
// Lease are the keys of its due and lease sets, Tag its keys' prefix
// ("cp:{sN}:", which names its records cp:{sN}:c:{id}), Part its breaker
// partition (contract §6; "" the endpoint's own).
type Queue struct {
	Due, Lease, Tag, Part string
}

// Core is what a Reader needs of the core store. *redisstore.Store
// implements it.
type Core interface {
	// PendingQueues returns endpoint's organisation queues (every shard).
	// Errors: policy.ErrUnavailable.
	PendingQueues(ctx context.Context, endpoint string) ([]Queue, error)
	// GateShut reports whether the gate of endpoint's breaker partition
	// part holds its callouts back (paused, breaker open or probing).
	// Errors: policy.ErrUnavailable.
	GateShut(ctx context.Context, endpoint, part string) (bool, error)
	// Decode decodes record m of callout id, without its long request and
	// response. Errors: policy.ErrNotFound when m is no record.
	Decode(ctx context.Context, id string, m map[string]string) (*policy.Callout, error)
}

// Reader lists pending callouts on one Redis. It is safe for concurrent
// use.
type Reader struct {
	rdb  redis.UniversalClient
	core Core
}

// New returns a Reader of the pending callouts on rdb, in the queues core
// names.
func New(rdb redis.UniversalClient, core Core) *Reader { return &Reader{rdb: rdb, core: core} }

// MaxPage bounds one page of Pending.
const MaxPage = 1000

// Pending lists one page of endpoint's pending callouts in state (contract §4:
// scheduled, held or in_flight), from offset, at most limit (1 to
// MaxPage): in_flight ones from the lease set, soonest lease expiry
// first; scheduled and held ones from the due sets, soonest due first. A
// due set holds both: an organisation queue's callouts are held while the
// gate of its breaker partition (contract §6) is shut and scheduled
// otherwise, as Get reports them, so of those two states one lists each
// queue's and the other none of them. Each callout has its record's
// fields and headers, without body, attempt log or response. next is the
// offset of the following page, 0 after the last. Errors:
// policy.ErrUnavailable; an unknown state or a limit out of range is an error.
func (s *Reader) Pending(ctx context.Context, endpoint string, state policy.State, offset, limit int) (
	page []*policy.Callout, next int, err error) {
	if limit < 1 || limit > MaxPage || offset < 0 {
		return nil, 0, fmt.Errorf("redisstore: pending: limit %d not 1–%d or offset %d negative", limit, MaxPage, offset)
	}
	qs, err := s.core.PendingQueues(ctx, endpoint)
	if err != nil {
		return nil, 0, err
	}
	type set struct {
		key, tag string
	}
	var sets []set
	for _, q := range qs {
		sets = append(sets, set{q.Due, q.Tag})
	}
	switch state {
	case policy.InFlight:
		sets = sets[:0]
		for _, q := range qs {
			sets = append(sets, set{q.Lease, q.Tag})
		}
	case policy.Scheduled, policy.Held:
		// each organisation queue's callouts are held by its breaker
		// partition's gate (contract §6), read once per partition
		sets = sets[:0]
		shut := map[string]bool{}
		for _, q := range qs {
			sh, ok := shut[q.Part]
			if !ok {
				var err error
				if sh, err = s.core.GateShut(ctx, endpoint, q.Part); err != nil {
					return nil, 0, err
				}
				shut[q.Part] = sh
			}
			if sh == (state == policy.Held) {
				sets = append(sets, set{q.Due, q.Tag})
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
		return nil, 0, script.Wrap("redisstore: pending", err)
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
		return nil, 0, script.Wrap("redisstore: pending", err)
	}
	page = make([]*policy.Callout, 0, len(all))
	for i, m := range all {
		c, err := s.core.Decode(ctx, m.id, cmds[i].Val())
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
