package redisstore

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// WatchGates runs this replica's gate cache until ctx ends (
// ARCHITECTURE.md "Hot-path budget"): while it runs, CachedAdmission answers reads to
// an endpoint from memory, refreshed by a subscription to keyspace.GateChannel (each
// message invalidates the endpoint's entry at once) and by a backstop poll
// every o.MaxStale/2 that reads every cached gate with gate_read.lua in one
// pipeline. A cached gate is never used once the reading it came from is
// older than o.MaxStale, so what a read sees is at most that stale whether
// or not messages arrive (a subscription that cannot connect, a message
// lost while it reconnects). Start it once per Store; it returns nil when
// ctx ends, and CachedAdmission then answers nothing (reads call Admit).
func (s *Store) WatchGates(ctx context.Context, o GateCacheOptions) error {
	s.gates.opts = o.withDefaults()
	s.gates.active.Store(true)
	defer s.gates.active.Store(false)
	var wg sync.WaitGroup
	wg.Go(func() { s.subscribeGates(ctx) })
	wg.Go(func() {
		t := time.NewTicker(s.gates.opts.MaxStale / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.pollGates(ctx)
			}
		}
	})
	wg.Wait()
	return nil
}

// subscribeGates applies keyspace.GateChannel's messages until ctx ends. go-redis
// reconnects a broken subscription by itself; every (re)subscription
// invalidates the whole cache, since messages may have been missed.
func (s *Store) subscribeGates(ctx context.Context) {
	ps := s.rdb.Subscribe(ctx, keyspace.GateChannel)
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
					s.gates.invalidateAll()
				}
			case *redis.Message:
				s.gates.message(m.Payload)
			}
		}
	}
}

// pollGates reads the gate of every endpoint read within Idle (one
// pipelined round trip per Redis node) and keeps each reading. A failed
// poll keeps nothing: the entries age past MaxStale and reads ask Redis
// themselves (contract §4's pass-through when it is unreachable).
func (s *Store) pollGates(ctx context.Context) {
	now := s.now()
	eps := s.gates.pollable(now)
	if len(eps) == 0 {
		return
	}
	s.gates.polls.Add(1)
	seq := s.gates.seq.Add(1)
	cmds := make([]*redis.Cmd, len(eps))
	pctx, cancel := context.WithTimeout(ctx, s.gates.opts.MaxStale)
	defer cancel()
	_, _ = s.rdb.Pipelined(pctx, func(p redis.Pipeliner) error {
		for i, ep := range eps {
			cmds[i] = s.lua.gateRead.EvalSha(pctx, p, []string{keysOf(ep).ep}, msArg(now))
		}
		return nil
	})
	for i, ep := range eps {
		v, err := cmds[i].Result()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// A restarted or flushed Redis: EVAL loads the script again.
			v, err = s.lua.gateRead.Run(pctx, s.rdb, []string{keysOf(ep).ep}, msArg(now)).Result()
		}
		if err != nil {
			continue
		}
		g, _, failures, err := decodeGateRead(v)
		if err != nil {
			s.log.Warn("redisstore: gate poll", "endpoint", ep, "err", err)
			continue
		}
		s.gates.entry(ep).offer(&gateReading{seq: seq, at: now, gate: g, failures: failures})
	}
}

// CachedAdmission answers a read's gate from this replica's gate cache,
// with no Redis round trip, when it can: while WatchGates runs, an endpoint
// whose cached gate is open is admitted with the cached consecutive-failure
// count, and one whose gate is disabled, or shut with its Until still ahead
// (breaker open until the probe time, paused, a probe out), is refused —
// what admit.lua answered, as of a reading at most MaxStale old. ok is
// false otherwise (no fresh entry, a half-open breaker, a probe time or
// pause end reached, WatchGates not running): call Admit, which takes the
// probe token in Redis and whose reply refreshes the entry.
func (s *Store) CachedAdmission(endpoint string) (a policy.Admission, ok bool) {
	c := s.gates
	if !c.active.Load() {
		return policy.Admission{}, false
	}
	if a, ok = c.entry(endpoint).lookup(s.now(), c.opts.MaxStale); ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return a, ok
}

// admitted keeps an Admit reply in the gate cache (WatchGates running),
// unless this request took the probe token: the gate is then 'probing',
// and the next read learns until when from Redis. seq was taken before the
// request was sent, at now.
func (c *gateCache) admitted(endpoint string, seq uint64, now time.Time, a policy.Admission) {
	if !c.active.Load() || a.ProbeToken != "" {
		return
	}
	c.entry(endpoint).offer(&gateReading{seq: seq, at: now, gate: a.Gate, failures: a.ConsecutiveFailures})
}

// GateCacheStats returns the gate cache's counters (for metrics).
func (s *Store) GateCacheStats() GateCacheStats { return s.gates.stats() }

// gateChanged invalidates endpoint's cached gate after a transition this
// replica's own script reported, so its next read asks Redis without
// waiting for its own message.
func (s *Store) gateChanged(endpoint string, ch policy.BreakerChange, paused bool) {
	if paused || ch.Opened || ch.Closed || ch.OutageBegan || ch.OutageEnded || ch.Probe {
		s.gates.changed(endpoint)
	}
}

// gateNotify tells every replica that endpoint's gate changed by plain
// commands (not a script, which calls gate_changed itself) and invalidates
// this replica's entry. A failed PUBLISH is logged: the change is made, and
// the other replicas' polls see it within their MaxStale.
func (s *Store) gateNotify(ctx context.Context, endpoint string) {
	s.gates.changed(endpoint)
	if err := s.rdb.Publish(ctx, keyspace.GateChannel, keysOf(endpoint).ep).Err(); err != nil {
		s.log.Warn("redisstore: gate change not published; other replicas see it at their next poll",
			"endpoint", endpoint, "err", err)
	}
}
