package redisstore

import (
	"context"
	"fmt"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
)

// MarkReplayed notes on dead letter id that replayID is its latest replay
// chain (contract §8), keeping the record's TTL; a chain that ended before
// the mark was written gets its outcome noted with it (the dispatcher may
// run it first). It reports false, changing nothing, when id is no longer
// a dead letter (expired, discarded). One round trip. Errors: ErrNotFound
// for a malformed id, ErrUnavailable.
func (s *Store) MarkReplayed(ctx context.Context, id, replayID string) (bool, error) {
	key, ok := keyspace.Callout(id)
	if !ok {
		return false, fmt.Errorf("redisstore: mark replayed %q: %w", id, policy.ErrNotFound)
	}
	chainKey, ok := keyspace.Callout(replayID)
	other := ok && replayID[:2] != id[:2] // the shard is the id's first two characters (keyspace)
	chain := chainKey
	if !ok || other {
		chain = key
	}
	now := s.clockArg(s.now())
	v, err := s.lua.replayMark.Run(ctx, s.rdb, &replayMarkArgs{Record: key, Chain: chain, ReplayID: replayID, Now: now})
	if err != nil {
		return false, s.wrap("mark replayed", err)
	}
	if v.N != 1 || !other {
		return v.N == 1, nil
	}
	// The chain is in another slot (a sharded endpoint's keyless replay):
	// read its state now the mark is written and note its outcome if it
	// ended (lua/replay_mark.lua); a chain that ends later notes it itself
	// (NoteReplayOutcome), so it is noted whichever comes first.
	f, err := s.rdb.HMGet(ctx, chainKey, record.FieldState, record.FieldFinished).Result()
	if err != nil {
		return true, s.wrap("mark replayed", err)
	}
	if st := record.StateOfCode(replyStr(f[0])); st.Finished() {
		return true, s.NoteReplayOutcome(ctx, id, replayID, st, replyStr(f[1]))
	}
	return true, nil
}

// NoteReplayOutcome notes on dead letter id that its replay chain replayID
// ended in state at ended (Unix ms, as the record's F field holds it; ""
// for Redis's now), when
// its mark still names that chain (lua/replay_mark.lua): for a chain in
// another slot than the dead letter (a sharded endpoint's keyless replay,
// docs/admin.md), which complete.lua cannot write across. Errors:
// ErrUnavailable.
func (s *Store) NoteReplayOutcome(ctx context.Context, id, replayID string, state policy.State, ended string) error {
	key, ok := keyspace.Callout(id)
	if !ok {
		return nil
	}
	_, err := s.lua.replayMark.Run(ctx, s.rdb, &replayMarkArgs{Record: key, Chain: key, ReplayID: replayID,
		Now: s.clockArg(s.now()), Outcome: string(state), Ended: ended})
	if err != nil {
		return s.wrap("note replay outcome", err)
	}
	return nil
}

// replayMarkArgs are replay_mark.lua's keys and arguments
// (lua/replay_mark.lua).
type replayMarkArgs struct {
	Record   string `lua:"record,key"`
	Chain    string `lua:"chain,key"`
	ReplayID string `lua:"replay_id"`
	Now      int64  `lua:"now"`
	Outcome  string `lua:"outcome"`
	Ended    string `lua:"ended"`
}

// ReplayMarkOf reads the replay mark of callout id (zero when it has none
// or does not exist). One round trip. Errors: ErrUnavailable.
func (s *Store) ReplayMarkOf(ctx context.Context, id string) (policy.ReplayMark, error) {
	key, ok := keyspace.Callout(id)
	if !ok {
		return policy.ReplayMark{}, nil
	}
	f, err := s.rdb.HMGet(ctx, key, deadletters.FieldReplayedBy, deadletters.FieldReplayedAt, deadletters.FieldReplayOutcome, deadletters.FieldReplayEnded).Result()
	if err != nil {
		return policy.ReplayMark{}, s.wrap("replay mark", err)
	}
	return policy.ReplayMark{ReplayedBy: replyStr(f[0]), ReplayedAt: record.ParseMs(replyStr(f[1])),
		ReplayOutcome: policy.State(replyStr(f[2])), ReplayEndedAt: record.ParseMs(replyStr(f[3]))}, nil
}

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
	qs, err := s.queuesOf(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, q := range qs {
		for range 100 {
			v, err := s.lua.dlPrune.Run(ctx, s.rdb, &pruneArgs{Counters: q.acc, DL: q.dl, DLB: q.dlb, Now: now,
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
