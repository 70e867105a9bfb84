package outbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/redis/go-redis/v9"
)

// What the Salesforce writer of every replica shares besides the entries
// (contract §8 "Salesforce writes are batched"): the flush lease, so that one
// replica writes a batch at a time and replicas do not split batches; the
// deferrals that hold every replica's writes back after a failed call,
// whole batches to one time; and the readiness of the outbox (how many
// entries are due and since when) that decides when a batch is sent.

// flushArgs are flush.lua's keys and arguments (lua/flush.lua).
type flushArgs struct {
	Key   string        `lua:"key,key"`
	Owner string        `lua:"owner"`
	Now   int64         `lua:"now"`
	Lease time.Duration `lua:"lease"`
}

// flushReply is flush.lua's reply.
type flushReply struct {
	Held bool `lua:"held"`
}

// AcquireFlush takes or renews the flush lease for owner, for lease (at
// least 1 ms) from Redis's now: true when owner holds it afterwards. A
// lease whose holder died ends by itself. One round trip (lua/flush.lua).
// Errors: policy.ErrUnavailable.
func (o *Outbox) AcquireFlush(ctx context.Context, owner string, lease time.Duration) (bool, error) {
	r, err := o.lua.flush.Run(ctx, o.rdb, &flushArgs{Key: keyspace.SFFlush, Owner: owner, Now: o.clockArg(),
		Lease: max(lease, time.Millisecond)})
	if err != nil {
		return false, wrap("flush lease", err)
	}
	return r.Held, nil
}

// ReleaseFlush gives the flush lease back when owner holds it. One round
// trip. Errors: policy.ErrUnavailable.
func (o *Outbox) ReleaseFlush(ctx context.Context, owner string) error {
	_, err := o.lua.flush.Run(ctx, o.rdb, &flushArgs{Key: keyspace.SFFlush, Owner: owner, Now: o.clockArg()})
	return wrap("flush release", err)
}

// Deferrals returns every scope's deferral ("" every write, or an
// sObject's API name; ended ones included: compare Until with the clock).
// One round trip. Errors: policy.ErrUnavailable.
func (o *Outbox) Deferrals(ctx context.Context) (map[string]policy.Deferral, error) {
	m, err := o.rdb.HGetAll(ctx, keyspace.SFDefer).Result()
	if err != nil {
		return nil, wrap("deferrals", err)
	}
	out := map[string]policy.Deferral{}
	for k, v := range m {
		if len(k) < 2 || k[1] != ':' {
			continue
		}
		d := out[k[2:]]
		switch k[0] {
		case 'u':
			d.Until = record.ParseMs(v)
		case 'n':
			d.Fails, _ = strconv.Atoi(v)
		}
		out[k[2:]] = d
	}
	return out, nil
}

// Defer counts one more failed call of scope and holds its writes back
// until until(fails), fails being the failed calls in a row including this
// one: as long after Redis's now as until(fails) is after this replica's
// (lua/until.lua), and Until is the end stored. Two round trips. Errors:
// policy.ErrUnavailable.
func (o *Outbox) Defer(ctx context.Context, scope string, until func(fails int) time.Time) (policy.Deferral, error) {
	n, err := o.rdb.HIncrBy(ctx, keyspace.SFDefer, "n:"+scope, 1).Result()
	if err != nil {
		return policy.Deferral{}, wrap("defer", err)
	}
	end, err := o.hold(ctx, keyspace.SFDefer, "u:"+scope, until(int(n)))
	return policy.Deferral{Fails: int(n), Until: end}, wrap("defer", err)
}

// Hold holds scope's writes back until until (on this replica's clock,
// stored as Redis's now plus that duration: lua/until.lua) without
// counting a failed call: for a wait whose length is not the calls'
// backoff, such as a refused token's (docs/salesforce.md "Tokens"), so
// the failures behind it do not lengthen the next outage's backoff. The
// reply's Fails is 0 (the count is left as it is). One round trip.
// Errors: policy.ErrUnavailable.
func (o *Outbox) Hold(ctx context.Context, scope string, until time.Time) (policy.Deferral, error) {
	end, err := o.hold(ctx, keyspace.SFDefer, "u:"+scope, until)
	return policy.Deferral{Until: end}, wrap("hold", err)
}

// untilArgs are until.lua's keys and arguments (lua/until.lua).
type untilArgs struct {
	Key   string        `lua:"key,key"`
	Field string        `lua:"field"`
	Now   int64         `lua:"now"`
	Hold  time.Duration `lua:"hold"`
}

// untilReply is until.lua's reply.
type untilReply struct {
	Until int64 `lua:"until"`
}

// hold stores in key (field "": a string key with a TTL) the end of a hold
// lasting until t on this replica's clock, as Redis's now plus that
// duration (at least 1 ms), and returns the end stored.
func (o *Outbox) hold(ctx context.Context, key, field string, t time.Time) (time.Time, error) {
	r, err := o.lua.until.Run(ctx, o.rdb, &untilArgs{Key: key, Field: field, Now: o.clockArg(),
		Hold: max(o.delay(t), time.Millisecond)})
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(r.Until), nil
}

// ClearDeferral ends scope's deferral and its count of failed calls (a
// call of it succeeded). One round trip. Errors: policy.ErrUnavailable.
func (o *Outbox) ClearDeferral(ctx context.Context, scope string) error {
	return wrap("clear deferral", o.rdb.HDel(ctx, keyspace.SFDefer, "u:"+scope, "n:"+scope).Err())
}

// DueStats returns how many entries are due now across every shard's
// outbox (claimed ones are not: their score is their lease's end) and when
// the longest-waiting of them became due (the zero time when none is). One
// pipelined round trip of 2·keyspace.Shards commands. Errors:
// policy.ErrUnavailable.
func (o *Outbox) DueStats(ctx context.Context) (due int64, oldest time.Time, err error) {
	now := ms(o.now())
	counts := make([]*redis.IntCmd, keyspace.Shards)
	firsts := make([]*redis.ZSliceCmd, keyspace.Shards)
	_, err = o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range counts {
			k := keyspace.OutboxOf(n).Due
			counts[n] = p.ZCount(ctx, k, "-inf", now)
			firsts[n] = p.ZRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Min: "-inf", Max: now, Count: 1})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, time.Time{}, wrap("due stats", err)
	}
	first := int64(-1)
	for n := range counts {
		due += counts[n].Val()
		if z := firsts[n].Val(); len(z) > 0 && (first < 0 || int64(z[0].Score) < first) {
			first = int64(z[0].Score)
		}
	}
	if first >= 0 {
		oldest = time.UnixMilli(first)
	}
	return due, oldest, nil
}
