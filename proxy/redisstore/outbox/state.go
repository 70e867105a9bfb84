package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/redis/go-redis/v9"
)

// The state of Failed_Callout__c records (cp:{sN}:sfs, keyspace). A record
// is keyed on its root: the dead letter it was created for. Its replay
// chains (contract §8) write to the same record, so the state says what the
// record must show whatever order its writes are sent in: the status and
// its event time, the latest replay chain, and a version that fences each
// write (policy.OutboxAck.Root). A record without state shows its dead
// letter as New.

// RecordState reads the state of root's record (the zero state when it
// has none). One round trip. Errors: policy.ErrNotFound for a malformed
// id, policy.ErrUnavailable.
func (o *Outbox) RecordState(ctx context.Context, root string) (policy.RecordState, error) {
	n, ok := keyspace.ShardOfID(root)
	if !ok {
		return policy.RecordState{}, fmt.Errorf("outbox: record state %q: %w", root, policy.ErrNotFound)
	}
	f, err := o.rdb.HMGet(ctx, keyspace.OutboxOf(n).State, "s:"+root, "rc:"+root, "t:"+root, "v:"+root,
		"a:"+root).Result()
	if err != nil {
		return policy.RecordState{}, wrap("record state", err)
	}
	version, _ := strconv.ParseInt(str(f[3]), 10, 64)
	return policy.RecordState{Status: str(f[0]), Replay: str(f[1]), At: record.ParseMs(str(f[2])),
		Version: version, Answered: record.ParseMs(str(f[4]))}, nil
}

// statusArgs are status.lua's keys and arguments (lua/status.lua); times
// are Unix ms in decimal, At "" for Redis's now, Answers "" for none.
type statusArgs struct {
	Due     string   `lua:"due,key"`
	State   string   `lua:"state,key"`
	Now     int64    `lua:"now"`
	Root    string   `lua:"root"`
	Status  string   `lua:"status"`
	Replay  string   `lua:"replay"`
	Phase   string   `lua:"phase"`
	Ends    []string `lua:"ends"`
	Copy    string   `lua:"copy"`
	At      string   `lua:"at"`
	Write   bool     `lua:"write"`
	Answers string   `lua:"answers"`
}

// statusReply is status.lua's reply.
type statusReply struct {
	Version int64 `lua:"version"`
}

// SetRecordStatus applies ch to root's record state, and queues its write
// (a policy.EntryStatus entry, due now) when ch.Write, in one script
// (lua/status.lua). Changes of one replay chain (ch.Replay) are ordered by
// the chain: its end (Reprocessed, Failed Again) wins over its start
// (Reprocessing) whatever their times, and its start after its end is
// ignored (contract §8: the record shows how its latest replay ended);
// other changes by ch.At (Redis's now when zero). It reports false when
// the change was older than the record's status (nothing changed but the
// Copy link and Answers). Errors: policy.ErrNotFound for a malformed root,
// policy.ErrUnavailable.
func (o *Outbox) SetRecordStatus(ctx context.Context, root string, ch policy.StatusChange) (bool, error) {
	n, ok := keyspace.ShardOfID(root)
	if !ok {
		return false, fmt.Errorf("outbox: record status %q: %w", root, policy.ErrNotFound)
	}
	k := keyspace.OutboxOf(n)
	at, answers := "", ""
	if !ch.At.IsZero() {
		at = ms(ch.At)
	}
	if !ch.Answers.IsZero() {
		answers = ms(ch.Answers)
	}
	phase := ""
	switch {
	case ch.Replay == "":
	case ch.Status == policy.RecordReprocessing:
		phase = "start"
	case slices.Contains(chainEnds, ch.Status):
		phase = "end"
	}
	r, err := o.lua.status.Run(ctx, o.rdb, &statusArgs{Due: k.Due, State: k.State, Now: o.clockArg(), Root: root,
		Status: ch.Status, Replay: ch.Replay, Phase: phase, Ends: chainEnds, Copy: ch.Copy, At: at, Write: ch.Write,
		Answers: answers})
	if err != nil {
		return false, wrap("record status", err)
	}
	return r.Version > 0, nil
}

// chainEnds are the statuses that end a replay chain (contract §8).
var chainEnds = []string{policy.RecordReprocessed, policy.RecordFailedAgain}

// RootOf returns the root whose record a replay dead letter id writes to,
// as SetRecordStatus(…, policy.StatusChange{Copy: id}) linked it; "" when
// id is not linked. One round trip. Errors: policy.ErrUnavailable.
func (o *Outbox) RootOf(ctx context.Context, id string) (string, error) {
	n, ok := keyspace.ShardOfID(id)
	if !ok {
		return "", nil
	}
	v, err := o.rdb.HGet(ctx, keyspace.OutboxOf(n).State, "r:"+id).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, wrap("root of", err)
}

// expireArgs are expire.lua's keys and arguments (lua/expire.lua).
type expireArgs struct {
	Expiry      string        `lua:"expiry,key"`
	Due         string        `lua:"due,key"`
	State       string        `lua:"state,key"`
	Now         int64         `lua:"now"`
	Recheck     time.Duration `lua:"recheck"`
	Expired     string        `lua:"expired"`
	Reprocessed string        `lua:"reprocessed"`
	Discarded   string        `lua:"discarded"`
	Candidates  []expiryCopy  `lua:"candidates"`
}

// expiryCopy is one dead-letter copy expire.lua checks: its record key and
// its id.
type expiryCopy struct {
	Record string `lua:"record,key"`
	ID     string `lua:"id"`
}

// expireReply is expire.lua's reply.
type expireReply struct {
	Roots []string `lua:"roots"`
}

// Expire checks up to limit (1–1000) of shard's dead-letter copies whose
// expiry time has come (contract §7: "When the proxy's copy expires, the
// record's status becomes Expired"; no keyspace notifications): a copy
// still present is checked again when its TTL ends (an hour later when it
// has none); a copy that is gone marks its record Expired and queues that
// write, when it was the record's latest copy and the record is not
// Reprocessed or Discarded. It returns the roots marked Expired. Every
// replica may run it: each candidate is re-checked in the script. Two
// round trips (ZRANGEBYSCORE, lua/expire.lua). Errors:
// policy.ErrUnavailable.
func (o *Outbox) Expire(ctx context.Context, shard, limit int) ([]string, error) {
	k := keyspace.OutboxOf(shard)
	now := o.now()
	ids, err := o.rdb.ZRangeByScore(ctx, k.Expiry, &redis.ZRangeBy{Min: "-inf", Max: ms(now),
		Count: int64(min(max(limit, 1), maxBatch))}).Result()
	if err != nil || len(ids) == 0 {
		return nil, wrap("expire", err)
	}
	a := &expireArgs{Expiry: k.Expiry, Due: k.Due, State: k.State, Now: o.clockArg(), Recheck: time.Hour,
		Expired: policy.RecordExpired, Reprocessed: policy.RecordReprocessed, Discarded: policy.RecordDiscarded,
		Candidates: make([]expiryCopy, len(ids))}
	for i, id := range ids {
		a.Candidates[i] = expiryCopy{Record: keyspace.ShardPrefix(shard) + "c:" + id, ID: id}
	}
	r, err := o.lua.expire.Run(ctx, o.rdb, a)
	if err != nil {
		return nil, wrap("expire", err)
	}
	return r.Roots, nil
}

// ExpiresAt returns when dead-letter copy id is scheduled to be checked for
// expiry; false when it is not scheduled. One round trip. Errors:
// policy.ErrUnavailable.
func (o *Outbox) ExpiresAt(ctx context.Context, id string) (time.Time, bool, error) {
	n, ok := keyspace.ShardOfID(id)
	if !ok {
		return time.Time{}, false, nil
	}
	v, err := o.rdb.ZScore(ctx, keyspace.OutboxOf(n).Expiry, id).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, wrap("expires at", err)
	}
	return time.UnixMilli(int64(v)), true, nil
}

// keepArgs are keep.lua's keys and arguments (lua/keep.lua).
type keepArgs struct {
	Due        string          `lua:"due,key"`
	Data       string          `lua:"data,key"`
	Now        int64           `lua:"now"`
	Margin     time.Duration   `lua:"margin"`
	Cap        time.Duration   `lua:"cap"`
	Candidates []keepCandidate `lua:"candidates"`
}

// keepCandidate is one record keep.lua keeps: its callout id and keys.
type keepCandidate struct {
	ID     string `lua:"id"`
	Record string `lua:"record,key"`
	Rest   string `lua:"rest,key"`
	Resp   string `lua:"resp,key"`
}

// keepReply is keep.lua's reply.
type keepReply struct {
	Kept   int `lua:"kept"`
	Capped int `lua:"capped"`
}

// KeepPending keeps the callout records that queued Salesforce writes
// still need (docs/salesforce.md "No write lost to its own retention"):
// for every queued dead-letter mirror and completion event of every shard,
// a record with less than margin left is given margin more, for at most
// limit after its first extension (on Redis's clock; lua/keep.lua). It
// returns how many records it extended and how many it left to expire
// because they reached limit (each record once, whatever number of its
// writes are queued). One pipelined round trip, then per shard
// with entries one ZRANGE and one script run per 1,000 entries. Errors:
// policy.ErrUnavailable.
func (o *Outbox) KeepPending(ctx context.Context, margin, limit time.Duration) (kept, capped int, err error) {
	cards := make([]*redis.IntCmd, keyspace.Shards)
	if _, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range cards {
			cards[n] = p.ZCard(ctx, keyspace.OutboxOf(n).Due)
		}
		return nil
	}); err != nil {
		return 0, 0, wrap("keep pending", err)
	}
	for n, c := range cards {
		k := keyspace.OutboxOf(n)
		for start := int64(0); start < c.Val(); start += maxBatch {
			names, err := o.rdb.ZRange(ctx, k.Due, start, start+maxBatch-1).Result()
			if err != nil {
				return kept, capped, wrap("keep pending", err)
			}
			a := &keepArgs{Due: k.Due, Data: k.Data, Now: o.clockArg(), Margin: margin, Cap: limit}
			seen := map[string]bool{}
			for _, name := range names {
				kind, keys := policy.SplitEntry(name)
				if kind != policy.EntryMirror && kind != policy.EntryResult || len(keys) == 0 || seen[keys[0]] {
					continue
				}
				rec, ok := keyspace.Callout(keys[0])
				if !ok {
					continue
				}
				seen[keys[0]] = true
				parts := keyspace.RecordParts(rec)
				a.Candidates = append(a.Candidates, keepCandidate{ID: keys[0], Record: parts[0], Rest: parts[1],
					Resp: parts[2]})
			}
			if len(a.Candidates) == 0 {
				continue
			}
			r, err := o.lua.keep.Run(ctx, o.rdb, a)
			if err != nil {
				return kept, capped, wrap("keep pending", err)
			}
			kept, capped = kept+r.Kept, capped+r.Capped
		}
	}
	return kept, capped, nil
}
