package deadletters

import (
	"context"
	"fmt"
	"strconv"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
)

// A dead letter's replay mark (contract §8 "replayed_by"): the fields
// Field* of its record, kept with the record's TTL, so a replayed dead
// letter keeps its history until the dead-letter retention ends (contract
// §7).

// MarkReplayed notes on dead letter id that replayID is its latest replay
// chain (contract §8), keeping the record's TTL; a chain that ended before
// the mark was written gets its outcome noted with it (the dispatcher may
// run it first). It reports false, changing nothing, when id is no longer
// a dead letter (expired, discarded). One round trip. Errors: policy.ErrNotFound
// for a malformed id, policy.ErrUnavailable.
func (r *Store) MarkReplayed(ctx context.Context, id, replayID string) (bool, error) {
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
	now := r.clockArg()
	v, err := r.mark.Run(ctx, r.rdb, &markArgs{Record: key, Chain: chain, ReplayID: replayID, Now: now})
	if err != nil {
		return false, wrap("mark replayed", err)
	}
	if v.N != 1 || !other {
		return v.N == 1, nil
	}
	// The chain is in another slot (a sharded endpoint's keyless replay):
	// read its state now the mark is written and note its outcome if it
	// ended (lua/mark.lua); a chain that ends later notes it itself
	// (NoteReplayOutcome), so it is noted whichever comes first.
	f, err := r.rdb.HMGet(ctx, chainKey, record.FieldState, record.FieldFinished).Result()
	if err != nil {
		return true, wrap("mark replayed", err)
	}
	if st := record.StateOfCode(replyStr(f[0])); st.Finished() {
		return true, r.NoteReplayOutcome(ctx, id, replayID, st, replyStr(f[1]))
	}
	return true, nil
}

// NoteReplayOutcome notes on dead letter id that its replay chain replayID
// ended in state at ended (Unix ms, as the record's F field holds it; ""
// for Redis's now), when
// its mark still names that chain (lua/mark.lua): for a chain in
// another slot than the dead letter (a sharded endpoint's keyless replay,
// docs/admin.md), which complete.lua cannot write across. Errors:
// policy.ErrUnavailable.
func (r *Store) NoteReplayOutcome(ctx context.Context, id, replayID string, state policy.State, ended string) error {
	key, ok := keyspace.Callout(id)
	if !ok {
		return nil
	}
	_, err := r.mark.Run(ctx, r.rdb, &markArgs{Record: key, Chain: key, ReplayID: replayID,
		Now: r.clockArg(), Outcome: string(state), Ended: ended})
	if err != nil {
		return wrap("note replay outcome", err)
	}
	return nil
}

// markArgs are mark.lua's keys and arguments
// (lua/mark.lua).
type markArgs struct {
	Record   string `lua:"record,key"`
	Chain    string `lua:"chain,key"`
	ReplayID string `lua:"replay_id"`
	Now      int64  `lua:"now"`
	Outcome  string `lua:"outcome"`
	Ended    string `lua:"ended"`
}

// markReply is mark.lua's reply: 1 when marked (or noted), else 0.
type markReply struct {
	N int64 `lua:"n"`
}

// ReplayMarkOf reads the replay mark of callout id (zero when it has none
// or does not exist). One round trip. Errors: policy.ErrUnavailable.
func (r *Store) ReplayMarkOf(ctx context.Context, id string) (policy.ReplayMark, error) {
	key, ok := keyspace.Callout(id)
	if !ok {
		return policy.ReplayMark{}, nil
	}
	f, err := r.rdb.HMGet(ctx, key, FieldReplayedBy, FieldReplayedAt, FieldReplayOutcome, FieldReplayEnded).Result()
	if err != nil {
		return policy.ReplayMark{}, wrap("replay mark", err)
	}
	return policy.ReplayMark{ReplayedBy: replyStr(f[0]), ReplayedAt: record.ParseMs(replyStr(f[1])),
		ReplayOutcome: policy.State(replyStr(f[2])), ReplayEndedAt: record.ParseMs(replyStr(f[3]))}, nil
}

// clockArg is the now a script takes: 0 for Redis's TIME, or this
// replica's clock with Options.PinScriptTime (script.Clock).
func (r *Store) clockArg() int64 {
	if r.pin {
		return r.now().UnixMilli()
	}
	return 0
}

// replyStr is an HMGET reply value as a string ("" for an absent field).
func replyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	default:
		return ""
	}
}
