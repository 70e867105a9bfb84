package redisstore

import (
	"context"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/wake"
	"github.com/redis/go-redis/v9"
)

// Reap returns up to limit (at most 1000) of endpoint's expired leases,
// of every queue, to the due set (ARCHITECTURE.md "A reaper returns
// expired leases"): each gets an attempt entry with error "lease_expired"
// and outcome retryable, loses its lease token (the lost worker's Complete
// then gets ErrStaleLease), and is due now, or held when the gate is shut;
// a reaped probe releases the probe token. The attempt still counts (it
// may have reached the upstream, contract §3). Two pipelined round trips,
// and a wake message when something was reaped. It returns the reaped ids.
// Errors: ErrUnavailable.
func (s *Store) Reap(ctx context.Context, endpoint string, limit int) ([]string, error) {
	limit = min(max(limit, 1), maxBatch)
	now := s.now()
	qs, err := s.queues.Orgs(ctx, endpoint, false)
	if err != nil {
		return nil, err
	}
	cands := make([]*redis.StringSliceCmd, len(qs))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range qs {
			cands[i] = p.ZRangeByScore(ctx, q.Lease, dueBy(now, limit))
		}
		return nil
	})
	for _, c := range cands {
		if err := c.Err(); err != nil && !isNil(err) {
			return nil, s.wrap("reap", err)
		}
	}
	var calls []*reapArgs
	callQ := map[*reapArgs]queue{}
	for i, q := range qs {
		ids := cands[i].Val()
		if len(ids) == 0 {
			continue
		}
		res, err := s.reservationsOf(ctx, q, ids)
		if err != nil {
			return nil, err
		}
		view, given, err := s.gateOf(ctx, q)
		if err != nil {
			return nil, err
		}
		c := &reapArgs{Due: q.Due, Lease: q.Lease, Counters: q.Counters, Now: s.clockArg(now), Part: q.Part}
		c.Gate, c.GateUntil = view.Args(given)
		for j, id := range ids {
			rc, _, _ := q.Record(id)
			c.Candidates = append(c.Candidates, reapCandidate{Record: rc, Reservation: res[j], ID: id})
		}
		calls = append(calls, c)
		callQ[c] = q
	}
	if len(calls) == 0 {
		return nil, nil
	}
	queued := make([]*script.Call[reapArgs, reapReply], len(calls))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			queued[i] = s.lua.reap.Queue(ctx, p, c)
		}
		return nil
	})
	var out []string
	for i, c := range calls {
		v, err := queued[i].Result(ctx, s.rdb)
		if err != nil {
			return out, s.wrap("reap", err)
		}
		q := callQ[c]
		for _, r := range v.Reaped {
			out = append(out, r.ID)
			if tok := r.Token; !q.Home && tok != "" {
				// A sharded queue: release the probe token if it held it.
				if _, err := s.lua.outcome.Run(ctx, s.rdb, s.giveBack(q.Endpoint, q.Part, tok, now)); err != nil {
					return out, s.wrap("reap: probe", err)
				}
			}
		}
	}
	if len(out) > 0 {
		wake.Publish(ctx, s.rdb, endpoint)
	}
	return out, nil
}

// reapArgs are reap.lua's keys and arguments (lua/reap.lua names each).
type reapArgs struct {
	Due        string          `lua:"due,key"`
	Lease      string          `lua:"lease,key"`
	Counters   string          `lua:"counters,key"`
	Now        int64           `lua:"now"`
	Gate       string          `lua:"gate"`
	GateUntil  string          `lua:"gate_until"`
	Part       string          `lua:"part"`
	Candidates []reapCandidate `lua:"candidates"`
}

// reapCandidate is one expired lease a reap re-checks.
type reapCandidate struct {
	Record      string `lua:"record,key"`
	Reservation string `lua:"reservation,key"`
	ID          string `lua:"id"`
}

// reapReply is reap.lua's reply: the callouts reaped.
type reapReply struct {
	Reaped []struct {
		ID    string `lua:"id"`
		Token string `lua:"token"`
	} `lua:"reaped"`
}

// reservationsOf returns the reservation key of each callout of ids
// of queue q (its record key when it has none), from their records' meta
// and issuer tag (one pipelined round trip).
func (s *Store) reservationsOf(ctx context.Context, q queue, ids []string) ([]string, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			c, _, _ := q.Record(id)
			cmds[i] = p.HGetAll(ctx, c)
		}
		return nil
	})
	if err != nil && !isNil(err) {
		return nil, s.wrap("reservations", err)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		c, _, _ := q.Record(id)
		out[i] = c
		m := cmds[i].Val()
		if meta, err := record.MetaOf(m); err == nil && meta.Key != "" {
			out[i] = q.Reservation(s.issuers.Of(ctx, m[record.FieldIssuer]), meta.Key)
		}
	}
	return out, nil
}
