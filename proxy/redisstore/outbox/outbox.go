// Package outbox is the Salesforce outbox in Redis (contract §7:
// "Salesforce writes (dead letters, status changes, notifications,
// completion events) go through a durable outbox in Redis"). Each store
// shard has one: a sorted set of entries scored by when they are due, with
// a hash of their payloads and failure counts (package keyspace names the
// keys). The core's scripts (proxy/redisstore, lib.lua outbox_dead_letter
// and owner_notice) queue entries in the same script as the change that
// causes them (redisstore.Options.Outbox), so no dead letter, outage,
// disable or completion can happen without its Salesforce write being
// queued; this package claims, settles and reports them, keeps the state of
// each Failed_Callout__c record, and the leases, deferrals, pause and
// watermarks every replica's writer shares. Every instant its scripts store
// is Redis's (script.Clock; callers pass durations), so writers whose
// clocks disagree still agree on every lease (contract §1). The salesforce package
// consumes it through an interface of its own over the policy types
// (policy.OutboxEntry, policy.OutboxAck, policy.RecordState, …).
//
// An entry is named kind ":" keys (policy.EntryName, the policy.Entry*
// kinds). Every script has one Go type for its arguments and one for its
// reply (proxy/redisstore/script), its Lua in lua/; the core never imports
// this package.
package outbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// luaFS holds the outbox's scripts; script.Clock and script.Numbers (str,
// num) are the prelude of each.
//
//go:embed lua/*.lua
var luaFS embed.FS

// maxBatch bounds one claim or expiry check.
const maxBatch = 1000

// Options configure an Outbox. The zero value works.
type Options struct {
	// Now is this replica's clock (the composition root passes its
	// Redis-corrected one). Every instant the outbox's scripts store —
	// leases, due times, deferrals, the pause, record-status stamps — is
	// Redis's clock, read inside the script (script.Clock, ARCHITECTURE.md
	// "One clock"); Now only turns the instants the writer computed into
	// the durations the scripts take, and bounds the reads of what is due
	// (DueShards, DueStats, Expire's candidates). Default time.Now.
	Now func() time.Time
	// PinScriptTime, for tests that travel in time only, makes every
	// script take Now() as its now instead of reading TIME. Never set in
	// production: a pinned clock is the skew that makes two replicas
	// disagree about a lease (contract §1).
	PinScriptTime bool
	// DeadLetterRetention is policy.dead_letter_retention (contract §7):
	// how long a handled reprocess request is remembered
	// (FinishReprocess). Default 720 h.
	DeadLetterRetention time.Duration
	// Scripts is the script layer of the client (the store's
	// redisstore.Store.Scripts, made by script.Attach): the package's
	// scripts join its one function library. nil: a script.Functions of
	// the package's own on the client (a library of its own).
	Scripts *script.Functions
}

// Outbox is the Salesforce outbox on one Redis (a *redis.Client or a
// *redis.ClusterClient: every script touches one shard's keys, or one key).
// It is safe for concurrent use.
type Outbox struct {
	rdb   redis.UniversalClient
	now   func() time.Time
	dlTTL time.Duration
	pin   bool // Options.PinScriptTime
	lua   scripts
}

// scripts are the outbox's scripts, each with its argument and reply type.
type scripts struct {
	claim  *script.Script[claimArgs, claimReply]
	ack    *script.Script[ackArgs, ackReply]
	put    *script.Script[putArgs, putReply]
	status *script.Script[statusArgs, statusReply]
	expire *script.Script[expireArgs, expireReply]
	flush  *script.Script[flushArgs, flushReply]
	until  *script.Script[untilArgs, untilReply]
	renew  *script.Script[renewArgs, renewReply]
	keep   *script.Script[keepArgs, keepReply]
}

// loadScripts loads the outbox's scripts, each composed with script.Clock
// and script.Numbers, registered with f.
func loadScripts(f *script.Functions) (scripts, error) {
	var s scripts
	p := script.Package{FS: luaFS, Prelude: []string{script.Clock, script.Numbers}, Functions: f}
	return s, errors.Join(
		script.LoadInto(&s.claim, p, "claim"),
		script.LoadInto(&s.ack, p, "ack"),
		script.LoadInto(&s.put, p, "put"),
		script.LoadInto(&s.status, p, "status"),
		script.LoadInto(&s.expire, p, "expire"),
		script.LoadInto(&s.flush, p, "flush"),
		script.LoadInto(&s.until, p, "until"),
		script.LoadInto(&s.renew, p, "renew"),
		script.LoadInto(&s.keep, p, "keep"),
	)
}

// New returns the outbox on client with opts' defaults filled in. It does
// not contact Redis. Entries are queued by the core's scripts only when its
// Store was made with redisstore.Options.Outbox.
func New(client redis.UniversalClient, opts Options) *Outbox {
	if opts.Scripts == nil {
		opts.Scripts = script.Attach(client, nil)
	}
	lua, err := loadScripts(opts.Scripts)
	if err != nil {
		panic(fmt.Errorf("outbox: %w", err)) // the scripts are embedded: a build defect, not a runtime condition
	}
	o := &Outbox{rdb: client, now: opts.Now, dlTTL: opts.DeadLetterRetention, pin: opts.PinScriptTime, lua: lua}
	if o.now == nil {
		o.now = time.Now
	}
	if o.dlTTL <= 0 {
		o.dlTTL = 720 * time.Hour
	}
	return o
}

// clockArg is every script's now argument (A.now): 0, which makes the
// script read Redis's clock (script.Clock), or with Options.PinScriptTime
// Now() in Unix ms.
func (o *Outbox) clockArg() int64 {
	if o.pin {
		return o.now().UnixMilli()
	}
	return 0
}

// delay is the duration from now until t in whole ms, at least 0: how an
// instant the writer computed on its clock (a retry's or a deferral's
// time) reaches a script, which adds it to Redis's now.
func (o *Outbox) delay(t time.Time) time.Duration {
	return max(0, t.Sub(o.now())).Truncate(time.Millisecond)
}

// wrap turns a Redis error into the outbox's (script.Wrap): connection-level
// failures wrap policy.ErrUnavailable. nil stays nil.
func wrap(op string, err error) error { return script.Wrap("outbox: "+op, err) }

// EntryShard returns the shard whose outbox holds the entry: the shard of
// its callout id (m, e, s: keyspace.ShardOfID) or of its endpoint (o, d,
// and any kind whose first key is an endpoint name: keyspace.ShardOf);
// false for a malformed name.
func EntryShard(name string) (int, bool) {
	kind, keys := policy.SplitEntry(name)
	if len(keys) == 0 || keys[0] == "" {
		return 0, false
	}
	switch kind {
	case policy.EntryMirror, policy.EntryResult, policy.EntryStatus:
		return keyspace.ShardOfID(keys[0])
	}
	return keyspace.ShardOf(keys[0]), true
}

// DueShards returns the shards whose outbox has an entry due now, in shard
// order: one pipelined round trip of keyspace.Shards ZRANGEBYSCORE … LIMIT 0 1.
// Errors: policy.ErrUnavailable.
func (o *Outbox) DueShards(ctx context.Context) ([]int, error) {
	return o.dueShards(ctx, "due shards", func(k keyspace.Outbox) string { return k.Due })
}

// ExpiryShards returns the shards with a dead-letter copy whose expiry
// time has come (Expire). One pipelined round trip. Errors:
// policy.ErrUnavailable.
func (o *Outbox) ExpiryShards(ctx context.Context) ([]int, error) {
	return o.dueShards(ctx, "expiry shards", func(k keyspace.Outbox) string { return k.Expiry })
}

func (o *Outbox) dueShards(ctx context.Context, op string, key func(keyspace.Outbox) string) ([]int, error) {
	by := &redis.ZRangeBy{Min: "-inf", Max: ms(o.now()), Count: 1}
	cmds := make([]*redis.StringSliceCmd, keyspace.Shards)
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range cmds {
			cmds[n] = p.ZRangeByScore(ctx, key(keyspace.OutboxOf(n)), by)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	var out []int
	for n, c := range cmds {
		if len(c.Val()) > 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

// claimArgs are claim.lua's keys and arguments (lua/claim.lua).
type claimArgs struct {
	Due   string        `lua:"due,key"`
	Data  string        `lua:"data,key"`
	Now   int64         `lua:"now"`
	Lease time.Duration `lua:"lease"`
	Limit int           `lua:"limit"`
}

// claimReply is claim.lua's reply: the lease end it wrote (Unix ms, on
// Redis's clock) and the entries.
type claimReply struct {
	LeaseUntil int64     `lua:"lease_until"`
	Entries    []claimed `lua:"entries"`
}

// claimed is one entry of claimReply.
type claimed struct {
	Name    string `lua:"name"`
	Payload string `lua:"payload"`
	Tries   int    `lua:"tries"`
}

// Claim leases up to limit (1–1000) of shard's due entries, oldest first,
// for lease from Redis's now: no other claim returns them before the lease
// ends, and an entry whose consumer died is due again then
// (at-least-once). Each entry's Lease is the lease end the script wrote,
// which Ack fences on. One round trip (lua/claim.lua). Errors: a lease
// under 1 ms, policy.ErrUnavailable.
func (o *Outbox) Claim(ctx context.Context, shard, limit int, lease time.Duration) ([]policy.OutboxEntry, error) {
	if lease < time.Millisecond {
		return nil, fmt.Errorf("outbox: claim: lease must be at least 1 ms")
	}
	k := keyspace.OutboxOf(shard)
	r, err := o.lua.claim.Run(ctx, o.rdb, &claimArgs{Due: k.Due, Data: k.Data, Now: o.clockArg(), Lease: lease,
		Limit: min(max(limit, 1), maxBatch)})
	if err != nil {
		return nil, wrap("claim", err)
	}
	until := time.UnixMilli(r.LeaseUntil)
	var out []policy.OutboxEntry
	for _, e := range r.Entries {
		out = append(out, policy.OutboxEntry{Shard: shard, Name: e.Name, Payload: e.Payload, Tries: e.Tries, Lease: until})
	}
	return out, nil
}

// renewArgs are renew.lua's keys and arguments (lua/renew.lua).
type renewArgs struct {
	Due    string        `lua:"due,key"`
	Now    int64         `lua:"now"`
	Lease  string        `lua:"lease"`
	Extend time.Duration `lua:"extend"`
	Names  []string      `lua:"names"`
}

// renewReply is renew.lua's reply.
type renewReply struct {
	LeaseUntil int64 `lua:"lease_until"`
	Renewed    int   `lua:"renewed"`
}

// Renew extends the lease of shard's entries names, claimed under lease
// (policy.OutboxEntry.Lease), to lease from Redis's now, while their batch
// is in flight: it returns the new lease, which their Ack then fences on,
// and how many entries still held the old one (an entry claimed again
// meanwhile is left alone). One round trip (lua/renew.lua). Errors: a
// lease under 1 ms, policy.ErrUnavailable.
func (o *Outbox) Renew(ctx context.Context, shard int, lease time.Time, names []string,
	extend time.Duration) (time.Time, int, error) {
	if extend < time.Millisecond {
		return time.Time{}, 0, fmt.Errorf("outbox: renew: lease must be at least 1 ms")
	}
	r, err := o.lua.renew.Run(ctx, o.rdb, &renewArgs{Due: keyspace.OutboxOf(shard).Due, Now: o.clockArg(),
		Lease: ms(lease), Extend: extend, Names: names})
	if err != nil {
		return time.Time{}, 0, wrap("renew", err)
	}
	return time.UnixMilli(r.LeaseUntil), r.Renewed, nil
}

// ackArgs are ack.lua's keys and arguments (lua/ack.lua).
type ackArgs struct {
	Due   string `lua:"due,key"`
	Data  string `lua:"data,key"`
	State string `lua:"state,key"`
	Lease string `lua:"lease"`
	Now   int64  `lua:"now"`
	Acks  []ack  `lua:"acks"`
}

// ack is one policy.OutboxAck as ack.lua reads it: At as the delay from
// now, Version "" for none.
type ack struct {
	Name       string        `lua:"name"`
	Verdict    string        `lua:"verdict"`
	Delay      time.Duration `lua:"delay"`
	SetPayload bool          `lua:"set_payload"`
	Payload    string        `lua:"payload"`
	Error      string        `lua:"error"`
	Root       string        `lua:"root"`
	Version    string        `lua:"version"`
	Forget     bool          `lua:"forget"`
}

// ackReply is ack.lua's reply.
type ackReply struct {
	Stale int `lua:"stale"`
}

// Ack settles claimed entries of one shard, each only while it still holds
// the claim's lease (lease is policy.OutboxEntry.Lease). It returns how
// many were left alone because their lease had passed and they were
// claimed again. A retry or deferral is due again as long after Redis's
// now as its At is after this replica's. One round trip (lua/ack.lua).
// Errors: policy.ErrUnavailable.
func (o *Outbox) Ack(ctx context.Context, shard int, lease time.Time, acks []policy.OutboxAck) (int, error) {
	if len(acks) == 0 {
		return 0, nil
	}
	k := keyspace.OutboxOf(shard)
	a := &ackArgs{Due: k.Due, Data: k.Data, State: k.State, Lease: ms(lease), Now: o.clockArg(),
		Acks: make([]ack, len(acks))}
	for i, x := range acks {
		version := ""
		if x.Version > 0 {
			version = strconv.FormatInt(x.Version, 10)
		}
		a.Acks[i] = ack{Name: x.Name, Verdict: string(x.Verdict), Delay: o.delay(x.At), SetPayload: x.SetPayload,
			Payload: x.Payload, Error: x.Error, Root: x.Root, Version: version, Forget: x.Forget}
	}
	r, err := o.lua.ack.Run(ctx, o.rdb, a)
	if err != nil {
		return 0, wrap("ack", err)
	}
	return r.Stale, nil
}

// Item is an entry to queue (Put).
type Item struct {
	// Name is kind ":" keys (policy.EntryName); its shard is
	// EntryShard(Name).
	Name string
	// Payload is carried with it ("" none).
	Payload string
}

// putArgs are put.lua's keys and arguments (lua/put.lua).
type putArgs struct {
	Due   string        `lua:"due,key"`
	Data  string        `lua:"data,key"`
	Now   int64         `lua:"now"`
	Delay time.Duration `lua:"delay"`
	Items []putItem     `lua:"items"`
}

type putItem struct {
	Name    string `lua:"name"`
	Payload string `lua:"payload"`
}

// putReply is put.lua's reply.
type putReply struct {
	Added int `lua:"added"`
}

// Put queues items due at at (as long after Redis's now as at is after
// this replica's). An item already queued (or claimed) is left
// as it is, so queuing is idempotent. One round trip per shard involved
// (lua/put.lua). It returns how many were added. Errors: a malformed
// name, policy.ErrUnavailable.
func (o *Outbox) Put(ctx context.Context, at time.Time, items ...Item) (int, error) {
	byShard := map[int][]putItem{}
	for _, it := range items {
		n, ok := EntryShard(it.Name)
		if !ok {
			return 0, fmt.Errorf("outbox: put: malformed entry %q", it.Name)
		}
		byShard[n] = append(byShard[n], putItem(it))
	}
	added := 0
	for n, its := range byShard {
		k := keyspace.OutboxOf(n)
		r, err := o.lua.put.Run(ctx, o.rdb, &putArgs{Due: k.Due, Data: k.Data, Now: o.clockArg(), Delay: o.delay(at),
			Items: its})
		if err != nil {
			return added, wrap("put", err)
		}
		added += r.Added
	}
	return added, nil
}

// ms formats a time as Unix ms in decimal, the form every outbox key and
// script keeps times in.
func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// str is a reply value (HMGET's) as a string: "" for an absent field.
func str(v any) string {
	s, _ := v.(string)
	return s
}
