package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// The Salesforce outbox (contract §7: "Salesforce writes (dead letters, status
// changes, notifications, completion events) go through a durable outbox in
// Redis"). Each shard has one: a sorted set of entries scored by when they
// are due, with a hash of their payloads and failure counts (keyspace). The
// scripts that end callouts queue entries in the same script as the change
// that causes them (Options.Outbox), so no dead letter, outage, disable or
// completion can happen without its Salesforce write being queued; the
// salesforce package consumes them in every replica, under a lease.
//
// An entry is named kind ":" key; the kinds are the Entry* constants.

// Outbox entry kinds.
const (
	// EntryMirror, "m:{callout id}": mirror the dead letter to its
	// Failed_Callout__c record. Queued with the dead letter.
	EntryMirror = "m"
	// EntryResult, "e:{callout id}": publish the Callout_Result__e of a
	// scheduled callout that ended (contract §8). Queued with the ending.
	EntryResult = "e"
	// EntryOutage, "o:{endpoint}:{callout id}": tell the endpoint's owner an
	// outage began; the id is its first dead letter (contract §6). Queued with
	// that dead letter.
	EntryOutage = "o"
	// EntryDisabled, "d:{endpoint}:{ms}": tell the endpoint's owner it was
	// disabled at ms (contract §6). Queued by Disable.
	EntryDisabled = "d"
	// EntryStatus, "s:{root id}": write the status the record of root must
	// show (SetRecordStatus, Expire).
	EntryStatus = "s"
)

// EntryName joins a kind and its keys into an entry name: EntryName("m",
// id) is "m:" + id. Keys must not contain ':' (callout ids and endpoint
// names never do).
func EntryName(kind string, keys ...string) string {
	return kind + ":" + strings.Join(keys, ":")
}

// SplitEntry splits an entry name into its kind and keys.
func SplitEntry(name string) (kind string, keys []string) {
	parts := strings.Split(name, ":")
	return parts[0], parts[1:]
}

// EntryShard returns the shard whose outbox holds the entry: the shard of
// its callout id (m, e, s) or of its endpoint (o, d, and any kind whose
// first key is an endpoint name); false for a malformed name.
func EntryShard(name string) (int, bool) {
	kind, keys := SplitEntry(name)
	if len(keys) == 0 || keys[0] == "" {
		return 0, false
	}
	switch kind {
	case EntryMirror, EntryResult, EntryStatus:
		return keyspace.ShardOfID(keys[0])
	}
	return keyspace.ShardOf(keys[0]), true
}

// outbox returns the outbox and expiry-schedule keys of the endpoint's
// shard (keyspace).
func (k epKeys) outbox() (sfo, sfx string) { return k.tag + "sfo", k.tag + "sfx" }

// Outbox is the Salesforce outbox of a Store. It is safe for concurrent use.
type Outbox struct {
	s   *Store
	lua outboxScripts
}

type outboxScripts struct {
	claim, ack, put, status, expire, flush *redis.Script
}

// NewOutbox returns the outbox on s's Redis and clock. Entries are queued
// by s's scripts only when s was made with Options.Outbox.
func NewOutbox(s *Store) *Outbox {
	lib, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		panic(err) // the scripts are embedded: a build defect, not a runtime condition
	}
	load := func(name string) *redis.Script {
		body, err := luaFS.ReadFile("lua/outbox_" + name + ".lua")
		if err != nil {
			panic(fmt.Errorf("redisstore: script outbox_%s: %w", name, err))
		}
		return redis.NewScript(string(lib) + "\n" + string(body))
	}
	return &Outbox{s: s, lua: outboxScripts{
		claim: load("claim"), ack: load("ack"), put: load("put"), status: load("status"),
		expire: load("expire"), flush: load("flush"),
	}}
}

// OutboxEntry is one claimed entry.
type OutboxEntry struct {
	// Shard is the shard whose outbox holds it.
	Shard int
	// Name is kind ":" keys (EntryName).
	Name string
	// Payload is what was queued with it ("" for entries the scripts
	// queue, which carry everything in their name).
	Payload string
	// Tries counts its failed tries so far (Ack with VerdictRetry).
	Tries int
	// Lease is the claim's fence: pass it back to Ack.
	Lease time.Time
}

// DueShards returns the shards whose outbox has an entry due now, in shard
// order: one pipelined round trip of keyspace.Shards ZRANGEBYSCORE … LIMIT 0 1.
// Errors: ErrUnavailable.
func (o *Outbox) DueShards(ctx context.Context) ([]int, error) {
	return o.dueShards(ctx, "due shards", func(k keyspace.Outbox) string { return k.Due })
}

// ExpiryShards returns the shards with a dead-letter copy whose expiry
// time has come (Expire). One pipelined round trip. Errors: ErrUnavailable.
func (o *Outbox) ExpiryShards(ctx context.Context) ([]int, error) {
	return o.dueShards(ctx, "expiry shards", func(k keyspace.Outbox) string { return k.Expiry })
}

func (o *Outbox) dueShards(ctx context.Context, op string, key func(keyspace.Outbox) string) ([]int, error) {
	by := &redis.ZRangeBy{Min: "-inf", Max: msArg(o.s.now()), Count: 1}
	cmds := make([]*redis.StringSliceCmd, keyspace.Shards)
	_, err := o.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range cmds {
			cmds[n] = p.ZRangeByScore(ctx, key(keyspace.OutboxOf(n)), by)
		}
		return nil
	})
	if err != nil {
		return nil, o.s.wrap(op, err)
	}
	var out []int
	for n, c := range cmds {
		if len(c.Val()) > 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

// Claim leases up to limit (1–1000) of shard's due entries, oldest first,
// until now+lease: no other claim returns them before the lease ends, and
// an entry whose consumer died is due again then (at-least-once). One round
// trip (outbox_claim.lua). Errors: ErrUnavailable.
func (o *Outbox) Claim(ctx context.Context, shard, limit int, lease time.Duration) ([]OutboxEntry, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("redisstore: outbox claim: lease must be > 0")
	}
	k := keyspace.OutboxOf(shard)
	now := o.s.now()
	until := msTime(now.Add(lease))
	v, err := o.s.run(ctx, "outbox claim", o.lua.claim, []string{k.Due, k.Data},
		msArg(now), msArg(until), strconv.Itoa(min(max(limit, 1), maxBatch)))
	if err != nil {
		return nil, err
	}
	var out []OutboxEntry
	for _, x := range replyArr(v) {
		e := replyArr(x)
		if len(e) < 3 {
			return nil, fmt.Errorf("redisstore: outbox claim: unexpected entry %v", x)
		}
		out = append(out, OutboxEntry{Shard: shard, Name: replyStr(e[0]), Payload: replyStr(e[1]),
			Tries: int(replyInt(e[2])), Lease: until})
	}
	return out, nil
}

// Verdict is how Ack settles a claimed entry.
type Verdict string

// The verdicts (outbox_ack.lua).
const (
	// VerdictDone: written; the entry goes (see OutboxAck.Root).
	VerdictDone Verdict = "done"
	// VerdictRetry: failed; due again at OutboxAck.At, one more failed try.
	VerdictRetry Verdict = "retry"
	// VerdictDefer: not tried (writes paused or slowed); due again at
	// OutboxAck.At, nothing counted.
	VerdictDefer Verdict = "defer"
)

// OutboxAck settles one claimed entry.
type OutboxAck struct {
	Name    string
	Verdict Verdict
	// At is when a retried or deferred entry is due again.
	At time.Time
	// Error is a retried entry's error, kept for reporting (no secrets).
	Error string
	// SetPayload replaces a retried entry's payload with Payload (e.g. the
	// targets of a notification still to reach).
	SetPayload bool
	Payload    string
	// Root and Version fence a done record write: when the record's state
	// version (RecordState.Version) is no longer Version, the entry is due
	// again at once instead of going, so the newer state is written too.
	Root    string
	Version int64
	// Forget, with Root, drops the record's state once the entry goes (its
	// last write, Expired, is done).
	Forget bool
}

// Ack settles claimed entries of one shard, each only while it still holds
// the claim's lease (lease is OutboxEntry.Lease). It returns how many were
// left alone because their lease had passed and they were claimed again.
// One round trip (outbox_ack.lua). Errors: ErrUnavailable.
func (o *Outbox) Ack(ctx context.Context, shard int, lease time.Time, acks []OutboxAck) (int, error) {
	if len(acks) == 0 {
		return 0, nil
	}
	k := keyspace.OutboxOf(shard)
	args := make([]any, 0, 2+9*len(acks))
	args = append(args, msArg(lease), msArg(o.s.now()))
	for _, a := range acks {
		version := ""
		if a.Version > 0 {
			version = strconv.FormatInt(a.Version, 10)
		}
		args = append(args, a.Name, string(a.Verdict), msArg(a.At), flag(a.SetPayload), a.Payload,
			a.Error, a.Root, version, flag(a.Forget))
	}
	v, err := o.s.run(ctx, "outbox ack", o.lua.ack, []string{k.Due, k.Data, k.State}, args...)
	if err != nil {
		return 0, err
	}
	return int(replyInt(v)), nil
}

// OutboxItem is an entry to queue.
type OutboxItem struct {
	// Name is kind ":" keys (EntryName); its shard is EntryShard(Name).
	Name string
	// Payload is carried with it ("" none).
	Payload string
}

// Put queues items due at at. An item already queued (or claimed) is left
// as it is, so queuing is idempotent. One round trip per shard involved
// (outbox_put.lua). It returns how many were added. Errors: a malformed
// name, ErrUnavailable.
func (o *Outbox) Put(ctx context.Context, at time.Time, items ...OutboxItem) (int, error) {
	byShard := map[int][]any{}
	for _, it := range items {
		n, ok := EntryShard(it.Name)
		if !ok {
			return 0, fmt.Errorf("redisstore: outbox put: malformed entry %q", it.Name)
		}
		byShard[n] = append(byShard[n], it.Name, it.Payload)
	}
	added := 0
	for n, pairs := range byShard {
		k := keyspace.OutboxOf(n)
		v, err := o.s.run(ctx, "outbox put", o.lua.put, []string{k.Due, k.Data},
			append([]any{msArg(at)}, pairs...)...)
		if err != nil {
			return added, err
		}
		added += int(replyInt(v))
	}
	return added, nil
}
