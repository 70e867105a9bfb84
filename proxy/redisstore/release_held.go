package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// releaseHeld makes endpoint's held callouts due now (after ResetBreaker
// or Enable): it walks the due set from now on in batches of maxBatch, each
// batch one ZRANGEBYSCORE and one release_held.lua run. It returns how many
// were released. Errors: ErrUnavailable.
func (s *Store) releaseHeld(ctx context.Context, endpoint string) (int, error) {
	k := keysOf(endpoint)
	now := msArg(s.now())
	released, offset := 0, int64(0)
	for {
		ids, err := s.rdb.ZRangeByScore(ctx, k.due, &redis.ZRangeBy{
			Min: "(" + now, Max: "+inf", Offset: offset, Count: maxBatch,
		}).Result()
		if err != nil {
			return released, s.wrap("release held", err)
		}
		if len(ids) == 0 {
			return released, nil
		}
		keys := []string{k.due}
		args := []any{now}
		for _, id := range ids {
			keys = append(keys, k.callout(id))
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
