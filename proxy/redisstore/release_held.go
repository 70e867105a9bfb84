package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// releaseHeld makes endpoint's held callouts (both layouts, every queue)
// due now (after ResetBreaker or Enable): it walks each due set from now
// on in batches of maxBatch, each batch one ZRANGEBYSCORE and one
// release_held.lua run, and wakes the dispatchers when it released any. It
// returns how many were released. Errors: ErrUnavailable.
func (s *Store) releaseHeld(ctx context.Context, endpoint string) (int, error) {
	qs, err := s.queuesOf(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	k := keysOf(endpoint)
	released := 0
	sets := [][2]string{{k.due, ""}}
	for _, q := range qs {
		sets = append(sets, [2]string{q.due, q.tag})
	}
	for _, set := range sets {
		n, err := s.releaseHeldIn(ctx, set[0], func(id string) string {
			if set[1] == "" {
				return k.callout(id)
			}
			return set[1] + "c:" + id
		})
		released += n
		if err != nil {
			return released, err
		}
	}
	if released > 0 {
		s.publishWake(ctx, endpoint)
	}
	return released, nil
}

// releaseHeldIn releases the held callouts of one due set; record names a
// member's record key.
func (s *Store) releaseHeldIn(ctx context.Context, due string, record func(id string) string) (int, error) {
	now := msArg(s.now())
	released, offset := 0, int64(0)
	for {
		ids, err := s.rdb.ZRangeByScore(ctx, due, &redis.ZRangeBy{
			Min: "(" + now, Max: "+inf", Offset: offset, Count: maxBatch,
		}).Result()
		if err != nil {
			return released, s.wrap("release held", err)
		}
		if len(ids) == 0 {
			return released, nil
		}
		keys := []string{due}
		args := []any{now}
		for _, id := range ids {
			keys = append(keys, record(id))
			args = append(args, id)
		}
		v, err := s.run(ctx, "release held", s.lua.releaseHeld, keys, args...)
		if err != nil {
			return released, err
		}
		n := int(replyInt(v))
		released += n
		// Released entries moved before the window; the rest stay in it.
		offset += int64(len(ids) - n)
		if len(ids) < maxBatch {
			return released, nil
		}
	}
}
