package redisstore

import (
	"context"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/wake"
	"github.com/redis/go-redis/v9"
)

// releaseHeld makes endpoint's held callouts (every queue) due now (after
// ResetBreaker or Enable): it walks each due set from now on in batches of
// maxBatch, each batch one ZRANGEBYSCORE and one release_held.lua run, and
// wakes the dispatchers when it released any. It returns how many were
// released. Errors: ErrUnavailable.
func (s *Store) releaseHeld(ctx context.Context, endpoint string) (int, error) {
	qs, err := s.queues.Orgs(ctx, endpoint, true)
	if err != nil {
		return 0, err
	}
	released := 0
	for _, q := range qs {
		n, err := s.releaseHeldIn(ctx, q)
		released += n
		if err != nil {
			return released, err
		}
	}
	if released > 0 {
		wake.Publish(ctx, s.rdb, endpoint)
	}
	return released, nil
}

// releaseHeldIn releases the held callouts of queue q.
func (s *Store) releaseHeldIn(ctx context.Context, q queue) (int, error) {
	due := q.Due
	// The window (due later than this replica's now) only picks the
	// candidates; the script re-checks each against Redis's clock.
	now := s.now()
	released, offset := 0, int64(0)
	for {
		ids, err := s.rdb.ZRangeByScore(ctx, due, &redis.ZRangeBy{
			Min: "(" + msArg(now), Max: "+inf", Offset: offset, Count: maxBatch,
		}).Result()
		if err != nil {
			return released, s.wrap("release held", err)
		}
		if len(ids) == 0 {
			return released, nil
		}
		a := releaseHeldArgs{Due: due, Now: s.clockArg(now)}
		for _, id := range ids {
			c, _, _ := q.Record(id)
			a.Callouts = append(a.Callouts, heldCallout{Record: c, ID: id})
		}
		v, err := s.lua.releaseHeld.Run(ctx, s.rdb, &a)
		if err != nil {
			return released, s.wrap("release held", err)
		}
		n := int(v.N)
		released += n
		// Released entries moved before the window; the rest stay in it.
		offset += int64(len(ids) - n)
		if len(ids) < maxBatch {
			return released, nil
		}
	}
}

// releaseHeldArgs are release_held.lua's keys and arguments
// (lua/release_held.lua).
type releaseHeldArgs struct {
	Due      string        `lua:"due,key"`
	Now      int64         `lua:"now"`
	Callouts []heldCallout `lua:"callouts"`
}

// heldCallout is one candidate of release_held.lua.
type heldCallout struct {
	Record string `lua:"record,key"`
	ID     string `lua:"id"`
}
