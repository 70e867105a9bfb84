package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/redis/go-redis/v9"
)

// Reads of the outbox for reports and tests, and the keys shared by every
// replica's writer: the pause of Salesforce writes and poll watermarks.

// Info describes one queued entry (for reports and tests).
type Info struct {
	// Due is when it is due (while claimed: when its lease ends).
	Due time.Time
	// Payload is what was queued with it ("" none).
	Payload string
	// Tries counts its failed tries.
	Tries int
	// LastError is the error of its last failed try ("" none).
	LastError string
}

// Entry reads one queued entry; false when it is not queued. One pipelined
// round trip. Errors: a malformed name, policy.ErrUnavailable.
func (o *Outbox) Entry(ctx context.Context, name string) (Info, bool, error) {
	n, ok := EntryShard(name)
	if !ok {
		return Info{}, false, fmt.Errorf("outbox: entry: malformed entry %q", name)
	}
	k := keyspace.OutboxOf(n)
	var score *redis.FloatCmd
	var data *redis.SliceCmd
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		score = p.ZScore(ctx, k.Due, name)
		data = p.HMGet(ctx, k.Data, "p:"+name, "n:"+name, "e:"+name)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Info{}, false, wrap("entry", err)
	}
	if score.Err() != nil {
		return Info{}, false, nil
	}
	d := data.Val()
	tries, _ := strconv.Atoi(str(d[1]))
	return Info{Due: time.UnixMilli(int64(score.Val())), Payload: str(d[0]), Tries: tries, LastError: str(d[2])},
		true, nil
}

// Len counts the entries of every shard's outbox (due, claimed or waiting
// to be retried; not the expiry schedule): one pipelined round trip of
// keyspace.Shards ZCARDs. Errors: policy.ErrUnavailable.
func (o *Outbox) Len(ctx context.Context) (int64, error) {
	cmds := make([]*redis.IntCmd, keyspace.Shards)
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range cmds {
			cmds[n] = p.ZCard(ctx, keyspace.OutboxOf(n).Due)
		}
		return nil
	})
	if err != nil {
		return 0, wrap("len", err)
	}
	var total int64
	for _, c := range cmds {
		total += c.Val()
	}
	return total, nil
}

// Pause pauses Salesforce writes of every replica until until (Salesforce
// answered REQUEST_LIMIT_EXCEEDED or STORAGE_LIMIT_EXCEEDED; why names
// which, for every replica's callout_salesforce_writes_paused): as long
// after Redis's now as until is after this replica's (lua/until.lua). A
// later pause replaces it, reason too. A time not after now does nothing.
// Two round trips (the reason first: a reason outliving a failed pause is
// never read, see PausedUntil). Errors: policy.ErrUnavailable.
func (o *Outbox) Pause(ctx context.Context, until time.Time, why string) error {
	d := o.delay(until)
	if d <= 0 {
		return nil
	}
	if err := o.rdb.Set(ctx, keyspace.SFPauseWhy, why, d).Err(); err != nil {
		return wrap("pause", err)
	}
	_, err := o.hold(ctx, keyspace.SFPause, "", until)
	return wrap("pause", err)
}

// PausedUntil returns the end of the current pause of Salesforce writes
// and its reason; the zero time and "" when none was set (compare it with
// the clock: the keys' TTL only cleans up). One pipelined round trip of 2
// commands. Errors: policy.ErrUnavailable.
func (o *Outbox) PausedUntil(ctx context.Context) (time.Time, string, error) {
	var till, why *redis.StringCmd
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		till, why = p.Get(ctx, keyspace.SFPause), p.Get(ctx, keyspace.SFPauseWhy)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return time.Time{}, "", wrap("paused", err)
	}
	if errors.Is(till.Err(), redis.Nil) {
		return time.Time{}, "", nil
	}
	return record.ParseMs(till.Val()), why.Val(), nil
}

// Watermark returns the named poll watermark (e.g. the SystemModstamp up
// to which Discarded records were handled); the zero time when unset. One
// round trip. Errors: policy.ErrUnavailable.
func (o *Outbox) Watermark(ctx context.Context, name string) (time.Time, error) {
	v, err := o.rdb.Get(ctx, keyspace.SFWatermark(name)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, wrap("watermark", err)
	}
	return record.ParseMs(v), nil
}

// SetWatermark stores the named poll watermark (ms precision). One round
// trip. Errors: policy.ErrUnavailable.
func (o *Outbox) SetWatermark(ctx context.Context, name string, t time.Time) error {
	return wrap("watermark", o.rdb.Set(ctx, keyspace.SFWatermark(name), ms(t), 0).Err())
}
