package gatecache

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Run keeps the cache fresh until ctx ends: while it runs, CachedAdmission
// answers reads from memory, refreshed by a subscription to
// keyspace.GateChannel (each message invalidates the endpoint's entry at
// once) and by a backstop poll every MaxStale/2 that reads every cached
// gate with Core.ReadGates in one pipeline. A cached gate is never used once
// the reading it came from is older than MaxStale, so what a read sees is
// at most that stale whether or not messages arrive (a subscription that
// cannot connect, a message lost while it reconnects). Start it once per
// Cache; it returns nil when ctx ends, and CachedAdmission then answers
// nothing (reads call Admit).
func (c *Cache) Run(ctx context.Context) error {
	c.active.Store(true)
	defer c.active.Store(false)
	var wg sync.WaitGroup
	wg.Go(func() { c.subscribe(ctx) })
	wg.Go(func() {
		t := time.NewTicker(c.opts.MaxStale / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.poll(ctx)
			}
		}
	})
	wg.Wait()
	return nil
}

// subscribe applies keyspace.GateChannel's messages until ctx ends. go-redis
// reconnects a broken subscription by itself; every (re)subscription
// invalidates the whole cache, since messages may have been missed.
func (c *Cache) subscribe(ctx context.Context) {
	ps := c.sub.Subscribe(ctx, keyspace.GateChannel)
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					c.invalidateAll()
				}
			case *redis.Message:
				c.message(m.Payload)
			}
		}
	}
}

// poll reads the gate of every endpoint read within Idle (one pipelined
// round trip per Redis node) and keeps each reading. A failed read keeps
// nothing: the entry ages past MaxStale and reads ask Redis themselves
// (contract §4's pass-through when it is unreachable).
func (c *Cache) poll(ctx context.Context) {
	now := c.opts.Now()
	eps := c.pollable(now)
	if len(eps) == 0 {
		return
	}
	c.polls.Add(1)
	seq := c.seq.Add(1)
	pctx, cancel := context.WithTimeout(ctx, c.opts.MaxStale)
	defer cancel()
	gates, errs := c.core.ReadGates(pctx, eps)
	for i, ep := range eps {
		if err := errs[i]; err != nil {
			// Redis unreachable is what MaxStale is for; anything else (a
			// script error, a reply the code does not understand) is logged.
			if !errors.Is(err, policy.ErrUnavailable) && !errors.Is(err, context.Canceled) {
				c.log.Warn("gatecache: poll", "endpoint", ep, "err", err)
			}
			continue
		}
		c.entry(ep).offer(&reading{seq: seq, at: now, gate: gates[i].Gate, failures: gates[i].ConsecutiveFailures})
	}
}
