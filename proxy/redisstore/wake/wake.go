// Package wake carries the dispatchers' wake messages (keyspace cp:wake,
// contract §9): the core store publishes an endpoint's name when it made
// work due now (create.lua, Store.Reap, the release of held callouts), and
// each replica's dispatcher subscribes, so an idle one need not wait for
// its backstop poll. Messages are a cue, not a queue: one lost costs at
// most the dispatcher's backstop wait.
package wake

import (
	"context"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// Publish tells the dispatchers that endpoint has work due now (PUBLISH
// on keyspace.WakeChannel). Best effort: the error is dropped, as a lost
// message costs at most the dispatcher's backstop wait.
func Publish(ctx context.Context, rdb redis.UniversalClient, endpoint string) {
	_ = rdb.Publish(ctx, keyspace.WakeChannel, endpoint).Err()
}

// confirm bounds Subscribe's wait for the subscription's confirmation.
const confirm = time.Second

// Subscribe subscribes to the wake channel (keyspace cp:wake) on rdb and
// returns a channel that receives a value, coalesced (capacity 1), for
// every message, until ctx ends: the dispatcher's cue that another replica
// made work due now. The subscription reconnects by itself (go-redis
// PubSub); what is published while it is down is lost, which the
// dispatcher's backstop wait bounds. log (nil: discarded) gets a warning
// when the subscription is not confirmed within a second.
func Subscribe(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) <-chan struct{} {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ps := rdb.Subscribe(ctx, keyspace.WakeChannel)
	// Wait for the subscription to be confirmed, so what is published
	// after Subscribe returns is seen — at most confirm: a Redis that
	// does not answer must not hold up the start (go-redis subscribes
	// again when it answers; until then the dispatcher's poll finds the
	// work, contract §9).
	cctx, cancel := context.WithTimeout(ctx, confirm)
	defer cancel()
	if _, err := ps.Receive(cctx); err != nil {
		log.Warn("redisstore: wake subscription", "err", err)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}
