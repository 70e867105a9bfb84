package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// Reads of the outbox for reports and tests, and the keys shared by every
// replica's writer: the pause of Salesforce writes and poll watermarks.

// OutboxInfo describes one queued entry (for reports and tests).
type OutboxInfo struct {
	// Due is when it is due (while claimed: when its lease ends).
	Due       time.Time
	Payload   string
	Tries     int
	LastError string
}

// Entry reads one queued entry; false when it is not queued. One pipelined
// round trip. Errors: a malformed name, ErrUnavailable.
func (o *Outbox) Entry(ctx context.Context, name string) (OutboxInfo, bool, error) {
	n, ok := EntryShard(name)
	if !ok {
		return OutboxInfo{}, false, fmt.Errorf("redisstore: outbox entry: malformed entry %q", name)
	}
	k := keyspace.OutboxOf(n)
	var score *redis.FloatCmd
	var data *redis.SliceCmd
	_, err := o.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		score = p.ZScore(ctx, k.Due, name)
		data = p.HMGet(ctx, k.Data, "p:"+name, "n:"+name, "e:"+name)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return OutboxInfo{}, false, o.s.wrap("outbox entry", err)
	}
	if score.Err() != nil {
		return OutboxInfo{}, false, nil
	}
	d := data.Val()
	return OutboxInfo{Due: time.UnixMilli(int64(score.Val())), Payload: replyStr(d[0]),
		Tries: atoi(replyStr(d[1])), LastError: replyStr(d[2])}, true, nil
}

// Len counts the entries of every shard's outbox (due, claimed or waiting
// to be retried; not the expiry schedule): one pipelined round trip of
// keyspace.Shards ZCARDs. Errors: ErrUnavailable.
func (o *Outbox) Len(ctx context.Context) (int64, error) {
	cmds := make([]*redis.IntCmd, keyspace.Shards)
	_, err := o.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := range cmds {
			cmds[n] = p.ZCard(ctx, keyspace.OutboxOf(n).Due)
		}
		return nil
	})
	if err != nil {
		return 0, o.s.wrap("outbox len", err)
	}
	var total int64
	for _, c := range cmds {
		total += c.Val()
	}
	return total, nil
}

// Pause pauses Salesforce writes of every replica until until (Salesforce
// answered REQUEST_LIMIT_EXCEEDED); a later pause replaces it. One round
// trip. Errors: ErrUnavailable.
func (o *Outbox) Pause(ctx context.Context, until time.Time) error {
	ttl := until.Sub(o.s.now())
	if ttl <= 0 {
		return nil
	}
	return o.s.wrap("outbox pause", o.s.rdb.Set(ctx, keyspace.SFPause, msArg(until), ttl).Err())
}

// PausedUntil returns the end of the current pause of Salesforce writes;
// the zero time when none was set (compare it with the clock: the key's
// TTL only cleans up). One round trip. Errors: ErrUnavailable.
func (o *Outbox) PausedUntil(ctx context.Context) (time.Time, error) {
	v, err := o.s.rdb.Get(ctx, keyspace.SFPause).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, o.s.wrap("outbox paused", err)
	}
	return fromMs(v), nil
}

// Watermark returns the named poll watermark (e.g. the SystemModstamp up
// to which Discarded records were handled); the zero time when unset. One
// round trip. Errors: ErrUnavailable.
func (o *Outbox) Watermark(ctx context.Context, name string) (time.Time, error) {
	v, err := o.s.rdb.Get(ctx, keyspace.SFWatermark(name)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, o.s.wrap("watermark", err)
	}
	return fromMs(v), nil
}

// SetWatermark stores the named poll watermark (ms precision). One round
// trip. Errors: ErrUnavailable.
func (o *Outbox) SetWatermark(ctx context.Context, name string, t time.Time) error {
	return o.s.wrap("watermark", o.s.rdb.Set(ctx, keyspace.SFWatermark(name), msArg(t), 0).Err())
}
