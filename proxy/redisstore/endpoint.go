package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// EndpointState reads endpoint's state: one pipelined round trip (its
// endpoint hash and the sizes of its due, lease and dead-letter sets, of
// every queue, keyspace), then the gate (gate_read.lua).
// Errors: ErrUnavailable.
func (s *Store) EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error) {
	now := s.now()
	var h *redis.MapStringStringCmd
	counts, err := s.pendingCounts(ctx, endpoint, func(p redis.Pipeliner) {
		h = p.HGetAll(ctx, keyspace.Endpoint(endpoint))
	})
	if err != nil {
		return policy.EndpointState{}, err
	}
	m := h.Val()
	g, br, err := s.gate(ctx, endpoint, now)
	if err != nil {
		return policy.EndpointState{}, err
	}
	st := policy.EndpointState{
		Endpoint: endpoint, Gate: g, Breaker: br,
		ConsecutiveFailures: atoi(m[eFailures]), OpenedAt: fromMs(m[eOpenedAt]),
		ProbeAt: fromMs(m[eProbeAt]), ProbeUntil: fromMs(m[eProbeUntil]),
		PausedUntil: fromMs(m[ePaused]), Disabled: m[eDisabled] == "1",
		DisabledReason: m[eDisReason], DisabledAt: fromMs(m[eDisAt]),
		LastSuccessAt: fromMs(m[eLastOK]), OutageStartedAt: fromMs(m[eOutage]),
		OutageNotified: m[eNotified] == "1", Due: counts.due, Leased: counts.leased,
		DeadLetters: counts.dead, BacklogBytes: counts.bytes + int64(atoi(m[eBytes])),
	}
	st.ProbeOut = m[eProbeToken] != "" && st.ProbeUntil.After(now)
	return st, nil
}

// pending are an endpoint's pending items and their charged bytes, over
// every queue (the home queue's bytes are in the endpoint
// hash and not counted here).
type pending struct {
	due, leased, dead, bytes int64
}

// pendingCounts reads pending in one pipeline, with more commands of the
// caller's (extra) in the same round trip.
func (s *Store) pendingCounts(ctx context.Context, endpoint string, extra func(p redis.Pipeliner)) (pending, error) {
	qs, err := s.queuesOf(ctx, endpoint)
	if err != nil {
		return pending{}, err
	}
	var due, leased, dead []*redis.IntCmd
	var bytes []*redis.StringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if extra != nil {
			extra(p)
		}
		for _, q := range qs {
			due = append(due, p.ZCard(ctx, q.due))
			leased = append(leased, p.ZCard(ctx, q.lease))
			dead = append(dead, p.ZCard(ctx, q.dl))
			if !q.home {
				bytes = append(bytes, p.HGet(ctx, q.acc, eBytes))
			}
		}
		return nil
	})
	if err != nil && !isNil(err) {
		return pending{}, s.wrap("endpoint state", err)
	}
	var out pending
	for _, c := range due {
		out.due += c.Val()
	}
	for _, c := range leased {
		out.leased += c.Val()
	}
	for _, c := range dead {
		out.dead += c.Val()
	}
	for _, c := range bytes {
		n, _ := strconv.ParseInt(c.Val(), 10, 64)
		out.bytes += n
	}
	return out, nil
}

// gate is endpoint's gate and breaker state at now as lib.lua computes them
// (gate_read.lua): Go never derives the gate from the stored fields itself.
// One round trip. Errors: ErrUnavailable.
func (s *Store) gate(ctx context.Context, endpoint string, now time.Time) (policy.Gate, policy.BreakerState, error) {
	g, br, _, err := s.gateRead(ctx, endpoint, now)
	return g, br, err
}

// gateRead is gate with the breaker's consecutive failures.
func (s *Store) gateRead(ctx context.Context, endpoint string, now time.Time) (policy.Gate, policy.BreakerState, int, error) {
	v, err := s.run(ctx, "gate_read", s.lua.gateRead, []string{keyspace.Endpoint(endpoint)}, msArg(now))
	if err != nil {
		return policy.Gate{}, "", 0, err
	}
	return decodeGateRead(v)
}

// decodeGateRead decodes gate_read.lua's reply.
func decodeGateRead(v any) (policy.Gate, policy.BreakerState, int, error) {
	a, err := replyN("gate_read", v, 4)
	if err != nil {
		return policy.Gate{}, "", 0, err
	}
	g := policy.Gate{State: policy.GateState(replyStr(a[0]))}
	if ms := replyStr(a[1]); ms != "0" {
		g.Until = fromMs(ms)
	}
	return g, policy.BreakerState(replyStr(a[2])), int(replyInt(a[3])), nil
}

// Backlog returns endpoint's pending items (due + leased callouts, every
// queue) and the bytes they and its dead letters are charged:
// the figures the backlog caps (Limits) compare. One pipelined round trip.
// Errors: ErrUnavailable.
func (s *Store) Backlog(ctx context.Context, endpoint string) (items, bytes int64, err error) {
	var b *redis.StringCmd
	c, err := s.pendingCounts(ctx, endpoint, func(p redis.Pipeliner) {
		b = p.HGet(ctx, keyspace.Endpoint(endpoint), eBytes)
	})
	if err != nil {
		return 0, 0, err
	}
	n, _ := strconv.ParseInt(b.Val(), 10, 64)
	return c.due + c.leased, n + c.bytes, nil
}
