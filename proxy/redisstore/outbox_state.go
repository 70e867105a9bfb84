package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// The state of Failed_Callout__c records (cp:{sN}:sfs, keyspace). A record
// is keyed on its root: the dead letter it was created for. Its replay
// chains (contract §8) write to the same record, so the state says what the
// record must show whatever order its writes are sent in: the status and
// its event time, the latest replay chain, and a version that fences each
// write (OutboxAck.Root). A record without state shows its dead letter as
// New.

// RecordState is what the record of one root must show.
type RecordState struct {
	// Status is the Failed_Callout__c status to write; "" when none was
	// set (the record shows its dead letter as New).
	Status string
	// Replay is the latest replay chain's callout id; "" when none.
	Replay string
	// At is the time of the event that set Status.
	At time.Time
	// Version counts the changes; 0 when the record has no state.
	Version int64
	// Answered is the latest SystemModstamp of an admin's request
	// (Reprocess Requested) that a status of the proxy answered: the
	// proxy may write its status over that request, and over no admin
	// choice made after it. Zero when none.
	Answered time.Time
}

// RecordState reads the state of root's record. One round trip. Errors:
// ErrNotFound for a malformed id, ErrUnavailable.
func (o *Outbox) RecordState(ctx context.Context, root string) (RecordState, error) {
	n, ok := keyspace.ShardOfID(root)
	if !ok {
		return RecordState{}, fmt.Errorf("redisstore: record state %q: %w", root, policy.ErrNotFound)
	}
	f, err := o.s.rdb.HMGet(ctx, keyspace.OutboxOf(n).State, "s:"+root, "rc:"+root, "t:"+root, "v:"+root,
		"a:"+root).Result()
	if err != nil {
		return RecordState{}, o.s.wrap("record state", err)
	}
	return RecordState{Status: replyStr(f[0]), Replay: replyStr(f[1]), At: fromMs(replyStr(f[2])),
		Version: replyInt(f[3]), Answered: fromMs(replyStr(f[4]))}, nil
}

// StatusChange is a change of what a record must show.
type StatusChange struct {
	// Status is the new Failed_Callout__c status.
	Status string
	// Replay, when set, is the record's latest replay chain.
	Replay string
	// Copy, when set, is a replay dead letter whose record is root's:
	// RootOf(Copy) returns root afterwards.
	Copy string
	// At is when the event happened (the clock's now when zero). A change
	// older than the record's current status is ignored.
	At time.Time
	// Write queues the record's write (an EntryStatus entry, due now).
	Write bool
	// Answers, when set, is the SystemModstamp of the admin's request
	// (Reprocess Requested) this change answers; RecordState.Answered
	// keeps the latest. Kept even when the change itself is older.
	Answers time.Time
}

// SetRecordStatus applies ch to root's record state, and queues its write
// when ch.Write, in one script (outbox_status.lua). It reports false when
// the change was older than the record's status (nothing changed but the
// Copy link). Errors: ErrNotFound for a malformed root, ErrUnavailable.
func (o *Outbox) SetRecordStatus(ctx context.Context, root string, ch StatusChange) (bool, error) {
	n, ok := keyspace.ShardOfID(root)
	if !ok {
		return false, fmt.Errorf("redisstore: record status %q: %w", root, policy.ErrNotFound)
	}
	now := o.s.now()
	at := ch.At
	if at.IsZero() {
		at = now
	}
	k := keyspace.OutboxOf(n)
	answers := ""
	if !ch.Answers.IsZero() {
		answers = msArg(ch.Answers)
	}
	v, err := o.s.run(ctx, "record status", o.lua.status, []string{k.Due, k.State},
		msArg(now), root, ch.Status, ch.Replay, ch.Copy, msArg(at), flag(ch.Write), answers)
	if err != nil {
		return false, err
	}
	return replyInt(v) > 0, nil
}

// RootOf returns the root whose record a replay dead letter id writes to,
// as SetRecordStatus(…, StatusChange{Copy: id}) linked it; "" when id is
// not linked. One round trip. Errors: ErrUnavailable.
func (o *Outbox) RootOf(ctx context.Context, id string) (string, error) {
	n, ok := keyspace.ShardOfID(id)
	if !ok {
		return "", nil
	}
	v, err := o.s.rdb.HGet(ctx, keyspace.OutboxOf(n).State, "r:"+id).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, o.s.wrap("root of", err)
}

// Expire checks up to limit (1–1000) of shard's dead-letter copies whose
// expiry time has come (contract §7: "When the proxy's copy expires, the
// record's status becomes Expired"; no keyspace notifications): a copy
// still present is checked again when its TTL ends; a copy that is gone
// marks its record Expired and queues that write, when it was the record's
// latest copy and the record is not Reprocessed or Discarded. It returns
// the roots marked Expired. Every replica may run it: each candidate is
// re-checked in the script. Two round trips (ZRANGEBYSCORE,
// outbox_expire.lua). Errors: ErrUnavailable.
func (o *Outbox) Expire(ctx context.Context, shard, limit int) ([]string, error) {
	k := keyspace.OutboxOf(shard)
	now := o.s.now()
	ids, err := o.s.rdb.ZRangeByScore(ctx, k.Expiry, dueBy(now, min(max(limit, 1), maxBatch))).Result()
	if err != nil || len(ids) == 0 {
		return nil, o.s.wrap("expire", err)
	}
	keys := []string{k.Expiry, k.Due, k.State}
	args := []any{msArg(now), durMs(time.Hour), policy.RecordExpired, policy.RecordReprocessed, policy.RecordDiscarded}
	for _, id := range ids {
		keys = append(keys, keyspace.ShardPrefix(shard)+"c:"+id)
		args = append(args, id)
	}
	v, err := o.s.run(ctx, "expire", o.lua.expire, keys, args...)
	if err != nil {
		return nil, err
	}
	return replyStrs(v), nil
}

// ExpiresAt returns when dead-letter copy id is scheduled to be checked for
// expiry; false when it is not scheduled. One round trip. Errors:
// ErrUnavailable.
func (o *Outbox) ExpiresAt(ctx context.Context, id string) (time.Time, bool, error) {
	n, ok := keyspace.ShardOfID(id)
	if !ok {
		return time.Time{}, false, nil
	}
	v, err := o.s.rdb.ZScore(ctx, keyspace.OutboxOf(n).Expiry, id).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, o.s.wrap("expires at", err)
	}
	return time.UnixMilli(int64(v)), true, nil
}
