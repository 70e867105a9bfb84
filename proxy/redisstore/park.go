package redisstore

import (
	"context"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/wake"
	"github.com/redis/go-redis/v9"
)

// releaseHeld makes endpoint's held callouts (every queue) scheduled where
// their gate is no longer shut (after ResetBreaker or Enable, or a success
// that closed a breaker): due now when they waited for the reopening, at
// their own time when that is later (lua/park.lua), and wakes the
// dispatchers when it released any. It returns how many were released.
// Errors: ErrUnavailable.
func (s *Store) releaseHeld(ctx context.Context, endpoint string) (int, error) {
	n, err := s.park(ctx, endpoint, "", false, 0)
	if n > 0 {
		wake.Publish(ctx, s.rdb, endpoint)
	}
	return n, err
}

// holdWaiting holds the waiting callouts a result just shut endpoint's
// gate on (the reply's shut): every scheduled callout of level's queues
// (level: the breaker partition whose gate it is, "" the endpoint's own
// breaker or pause, which holds every queue) is held, due at reopen
// (Redis-clock ms) if it was due before, so its record says held (contract
// §12; lua/lib.lua holds). Run by the replica that applied the result,
// after it; a failure is logged: the callouts are still held back by the
// gate (claims skip a shut queue), only their records still say
// scheduled.
func (s *Store) holdWaiting(ctx context.Context, endpoint, level string, reopen int64) {
	if _, err := s.park(ctx, endpoint, level, true, reopen); err != nil {
		s.log.Warn("redisstore: the callouts a shut gate holds were not all marked held; their records say scheduled",
			"endpoint", endpoint, "err", err)
	}
}

// park runs park.lua over endpoint's queues (hold: those of partition
// level, every queue when level is ""; release: every queue) in batches
// of maxBatch, each batch one ZRANGEBYSCORE and one park.lua run. It
// returns how many callouts changed state. Errors: ErrUnavailable.
func (s *Store) park(ctx context.Context, endpoint, level string, hold bool, reopen int64) (int, error) {
	qs, err := s.queues.Orgs(ctx, endpoint, true)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, q := range qs {
		if hold && level != "" && q.Part != level {
			continue
		}
		n, err := s.parkIn(ctx, q, hold, reopen)
		moved += n
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// parkIn runs park.lua over queue q's due set. Release walks the whole
// set (each released moves to now, among those already walked); hold walks
// first those due before reopen, the gate's reopening the result reported
// (each held moves to the reopening, out of that window), then the rest.
func (s *Store) parkIn(ctx context.Context, q queue, hold bool, reopen int64) (int, error) {
	if !hold {
		return s.parkWindow(ctx, q, hold, "-inf", "+inf", false)
	}
	at := msArg(msTimeOf(reopen))
	n, err := s.parkWindow(ctx, q, hold, "-inf", "("+at, true)
	if err != nil {
		return n, err
	}
	m, err := s.parkWindow(ctx, q, hold, at, "+inf", false)
	return n + m, err
}

// parkWindow runs park.lua over the members of q's due set scored from min
// to max (ZRANGEBYSCORE's bounds), maxBatch at a time; leaves: the callouts
// it changes leave the window.
func (s *Store) parkWindow(ctx context.Context, q queue, hold bool, min, max string, leaves bool) (int, error) {
	window := &redis.ZRangeBy{Min: min, Max: max, Count: maxBatch}
	moved := 0
	for {
		ids, err := s.rdb.ZRangeByScore(ctx, q.Due, window).Result()
		if err != nil {
			return moved, s.wrap("park", err)
		}
		if len(ids) == 0 {
			return moved, nil
		}
		a := parkArgs{Due: q.Due, Counters: q.Counters, Now: s.clockArg(s.now()), Hold: hold, Part: q.Part}
		if !q.Home {
			// the endpoint hash is in another slot: the gate read now
			v, err := s.gates.Read(ctx, q.Endpoint, q.Part)
			if err != nil {
				return moved, err
			}
			a.Gate, a.GateUntil = v.Args(true)
		}
		for _, id := range ids {
			c, _, _ := q.Record(id)
			a.Callouts = append(a.Callouts, parkedCallout{Record: c, ID: id})
		}
		v, err := s.lua.park.Run(ctx, s.rdb, &a)
		if err != nil {
			return moved, s.wrap("park", err)
		}
		moved += int(v.N)
		window.Offset += int64(len(ids))
		if leaves {
			window.Offset -= v.N
		}
		if len(ids) < maxBatch {
			return moved, nil
		}
	}
}

// parkArgs are park.lua's keys and arguments (lua/park.lua).
type parkArgs struct {
	Due       string          `lua:"due,key"`
	Counters  string          `lua:"counters,key"`
	Now       int64           `lua:"now"`
	Hold      bool            `lua:"hold"`
	Part      string          `lua:"part"`
	Gate      string          `lua:"gate"`
	GateUntil string          `lua:"gate_until"`
	Callouts  []parkedCallout `lua:"callouts"`
}

// parkedCallout is one candidate of park.lua.
type parkedCallout struct {
	Record string `lua:"record,key"`
	ID     string `lua:"id"`
}
