// Package pending lists an endpoint's pending callouts for the admin API
// (contract §4 states scheduled, held and in_flight; docs/admin.md "GET
// /admin/v1/callouts"): the members of its queues' due and lease sets
// (keyspace "Shards and queues"), merged by due time or lease expiry, with
// their records. It only reads; the core store (proxy/redisstore) tells it
// where the sets are and how a record decodes (Core).
package pending

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
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
// first; scheduled and held ones from the due sets, soonest due first, in
// the state their records keep (as Get reports them: a due set holds
// both). Each callout has its record's fields and headers, without body,
// attempt log or response. next is the offset of the following page, 0
// after the last. Errors: policy.ErrUnavailable; an unknown state or a
// limit out of range is an error.
func (s *Reader) Pending(ctx context.Context, endpoint string, state policy.State, offset, limit int) (
	page []*policy.Callout, next int, err error) {
	if limit < 1 || limit > MaxPage || offset < 0 {
		return nil, 0, fmt.Errorf("redisstore: pending: limit %d not 1–%d or offset %d negative", limit, MaxPage, offset)
	}
	if state != policy.Scheduled && state != policy.Held && state != policy.InFlight {
		return nil, 0, fmt.Errorf("redisstore: pending: state %q is not scheduled, held or in_flight", state)
	}
	qs, err := s.core.PendingQueues(ctx, endpoint)
	if err != nil {
		return nil, 0, err
	}
	var sets []set
	for _, q := range qs {
		key := q.Due
		if state == policy.InFlight {
			key = q.Lease
		}
		sets = append(sets, set{key, q.Tag})
	}
	// The first offset+limit+1 members in state (one more says whether
	// there is a next page), read from every set's first window entries
	// merged by score (every queue, keyspace), the window doubled until
	// enough are in state or the sets hold no more.
	want := offset + limit + 1
	var all []member
	for window := want; ; window *= 2 {
		merged, more, err := s.firsts(ctx, sets, window)
		if err != nil {
			return nil, 0, err
		}
		if all, err = s.inState(ctx, merged, state); err != nil {
			return nil, 0, err
		}
		if len(all) >= want || !more {
			break
		}
	}
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
		if c.State != state {
			continue // moved on between the two reads
		}
		c.Body, c.AttemptLog, c.Response, c.Fingerprint = nil, nil, nil, ""
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

// set is one due or lease set: its key, and its queue's key prefix.
type set struct {
	key, tag string
}

// member is one entry of a set: the callout's id, its record's key, and its
// due time or lease expiry (ms).
type member struct {
	id, record string
	score      float64
}

// firsts returns the first window members of every set, merged by score,
// and whether any set holds more. One pipelined round trip.
func (s *Reader) firsts(ctx context.Context, sets []set, window int) ([]member, bool, error) {
	zs := make([]*redis.ZSliceCmd, len(sets))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range sets {
			zs[i] = p.ZRangeWithScores(ctx, st.key, 0, int64(window-1))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, script.Wrap("redisstore: pending", err)
	}
	var all []member
	more := false
	for i, z := range zs {
		more = more || len(z.Val()) == window
		for _, m := range z.Val() {
			id := m.Member.(string)
			all = append(all, member{id, sets[i].tag + "c:" + id, m.Score})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score < all[j].score })
	return all, more, nil
}

// inState keeps the members whose record is in state: all of them for
// in_flight (the lease set holds nothing else), else those whose record
// is in state (record.FieldState), read in one pipelined round trip.
func (s *Reader) inState(ctx context.Context, all []member, state policy.State) ([]member, error) {
	if state == policy.InFlight {
		return all, nil
	}
	cmds := make([]*redis.StringCmd, len(all))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range all {
			cmds[i] = p.HGet(ctx, m.record, record.FieldState)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, script.Wrap("redisstore: pending", err)
	}
	kept := all[:0:0]
	for i, m := range all {
		if record.StateOfCode(cmds[i].Val()) == state {
			kept = append(kept, m)
		}
	}
	return kept, nil
}
