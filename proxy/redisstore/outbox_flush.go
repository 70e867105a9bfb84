package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// What the Salesforce writer of every replica shares besides the entries
// (contract §8 "Salesforce writes are batched"): the flush lease, so that one
// replica writes a batch at a time and replicas do not split batches; the
// deferrals that hold every replica's writes back after a failed call,
// whole batches to one time; and the readiness of the outbox (how many
// entries are due and since when) that decides when a batch is sent.

// AcquireFlush takes or renews the flush lease for owner until now+lease
// (the store's clock): true when owner holds it afterwards. A lease whose
// holder died ends by itself. One round trip (outbox_flush.lua). Errors:
// ErrUnavailable.
func (o *Outbox) AcquireFlush(ctx context.Context, owner string, lease time.Duration) (bool, error) {
	now := o.s.now()
	v, err := o.s.run(ctx, "flush lease", o.lua.flush, []string{keyspace.SFFlush}, owner, msArg(now), msArg(now.Add(lease)))
	if err != nil {
		return false, err
	}
	return replyInt(v) == 1, nil
}

// ReleaseFlush gives the flush lease back when owner holds it. One round
// trip. Errors: ErrUnavailable.
func (o *Outbox) ReleaseFlush(ctx context.Context, owner string) error {
	_, err := o.s.run(ctx, "flush release", o.lua.flush, []string{keyspace.SFFlush}, owner, msArg(o.s.now()), "")
	return err
}

// Deferral holds back the Salesforce writes of one scope after failed
// calls: "" every write, or an sObject's API name (its writes only).
type Deferral struct {
	// Until is when the writes may be tried again.
	Until time.Time
	// Fails counts the failed calls in a row behind it.
	Fails int
}

// Deferrals returns every scope's deferral (ended ones included; compare
// Until with the clock). One round trip. Errors: ErrUnavailable.
func (o *Outbox) Deferrals(ctx context.Context) (map[string]Deferral, error) {
	m, err := o.s.rdb.HGetAll(ctx, keyspace.SFDefer).Result()
	if err != nil {
		return nil, o.s.wrap("deferrals", err)
	}
	out := map[string]Deferral{}
	for k, v := range m {
		if len(k) < 2 || k[1] != ':' {
			continue
		}
		d := out[k[2:]]
		switch k[0] {
		case 'u':
			d.Until = fromMs(v)
		case 'n':
			d.Fails = atoi(v)
		}
		out[k[2:]] = d
	}
	return out, nil
}

// Defer counts one more failed call of scope and holds its writes back
// until until(fails), fails being the failed calls in a row including this
// one. Two round trips. Errors: ErrUnavailable.
func (o *Outbox) Defer(ctx context.Context, scope string, until func(fails int) time.Time) (Deferral, error) {
	n, err := o.s.rdb.HIncrBy(ctx, keyspace.SFDefer, "n:"+scope, 1).Result()
	if err != nil {
		return Deferral{}, o.s.wrap("defer", err)
	}
	d := Deferral{Fails: int(n), Until: until(int(n))}
	return d, o.s.wrap("defer", o.s.rdb.HSet(ctx, keyspace.SFDefer, "u:"+scope, msArg(d.Until)).Err())
}

// ClearDeferral ends scope's deferral and its count of failed calls (a
// call of it succeeded). One round trip. Errors: ErrUnavailable.
func (o *Outbox) ClearDeferral(ctx context.Context, scope string) error {
	return o.s.wrap("clear deferral", o.s.rdb.HDel(ctx, keyspace.SFDefer, "u:"+scope, "n:"+scope).Err())
}

// DueStats returns how many entries are due now across every shard's
// outbox (claimed ones are not: their score is their lease's end) and when
// the longest-waiting of them became due (the zero time when none is). One
// pipelined round trip of 2·keyspace.Shards commands. Errors: ErrUnavailable.
func (o *Outbox) DueStats(ctx context.Context) (due int64, oldest time.Time, err error) {
	now := msArg(o.s.now())
	counts := make([]*redis.IntCmd, keyspace.Shards)
	firsts := make([]*redis.ZSliceCmd, keyspace.Shards)
	_, err = o.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range counts {
			k := keyspace.OutboxOf(n).Due
			counts[n] = p.ZCount(ctx, k, "-inf", now)
			firsts[n] = p.ZRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Min: "-inf", Max: now, Count: 1})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, time.Time{}, o.s.wrap("due stats", err)
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
