package redisstore

import (
	"context"
)

// PruneDeadLetters drops the entries older than the dead-letter retention
// from endpoint's dead-letter indexes (every queue; contract §7: dead letters
// expire after dead_letter_retention; their records expire by TTL, and a
// new dead letter prunes its own queue's index a little, but an endpoint
// that stopped failing would keep stale entries without this sweep). It
// returns how many were dropped, and releases the backlog bytes their
// records were charged (dl_prune.lua, 100 entries a round trip, at most 100
// round trips a queue and call). Errors: ErrUnavailable.
func (s *Store) PruneDeadLetters(ctx context.Context, endpoint string) (int64, error) {
	now := s.clockArg(s.now())
	qs, err := s.queues.Of(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, q := range qs {
		for range 100 {
			v, err := s.lua.dlPrune.Run(ctx, s.rdb, &pruneArgs{Counters: q.Counters, DL: q.DL, DLB: q.DLB, Now: now,
				Retention: s.dlTTL.Milliseconds()})
			if err != nil {
				return total, s.wrap("dl_prune", err)
			}
			n := v.N
			total += n
			if n < 100 {
				break
			}
		}
	}
	return total, nil
}

// pruneArgs are dl_prune.lua's keys and arguments (lua/dl_prune.lua).
type pruneArgs struct {
	Counters  string `lua:"counters,key"`
	DL        string `lua:"dl,key"`
	DLB       string `lua:"dlb,key"`
	Now       int64  `lua:"now"`
	Retention int64  `lua:"retention"`
}
