package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

// EndpointState reads endpoint's state: one pipelined round trip (HGETALL
// and three ZCARDs). Errors: ErrUnavailable.
func (s *Store) EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error) {
	now := s.now()
	k := keysOf(endpoint)
	var h *redis.MapStringStringCmd
	var due, leased, dl *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		h = p.HGetAll(ctx, k.ep)
		due, leased, dl = p.ZCard(ctx, k.due), p.ZCard(ctx, k.lease), p.ZCard(ctx, k.dl)
		return nil
	})
	if err != nil {
		return policy.EndpointState{}, s.wrap("endpoint state", err)
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
		OutageNotified: m[eNotified] == "1", Due: due.Val(), Leased: leased.Val(),
		DeadLetters: dl.Val(), BacklogBytes: int64(atoi(m[eBytes])),
	}
	st.ProbeOut = m[eProbeToken] != "" && st.ProbeUntil.After(now)
	return st, nil
}

// gate is endpoint's gate and breaker state at now as lib.lua computes them
// (gate_read.lua): Go never derives the gate from the stored fields itself.
// One round trip. Errors: ErrUnavailable.
func (s *Store) gate(ctx context.Context, endpoint string, now time.Time) (policy.Gate, policy.BreakerState, error) {
	v, err := s.run(ctx, "gate_read", s.lua.gateRead, []string{keysOf(endpoint).ep}, msArg(now))
	if err != nil {
		return policy.Gate{}, "", err
	}
	g, br, _, err := decodeGateRead(v)
	return g, br, err
}

// decodeGateRead decodes gate_read.lua's reply {gate, until ms, breaker,
// consecutive failures}.
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

// Backlog returns endpoint's pending items (due + leased callouts) and the
// bytes of their request bodies: the figures the backlog cap (Limits)
// compares. One pipelined round trip. Errors: ErrUnavailable.
func (s *Store) Backlog(ctx context.Context, endpoint string) (items, bytes int64, err error) {
	k := keysOf(endpoint)
	var due, leased *redis.IntCmd
	var b *redis.StringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		due, leased, b = p.ZCard(ctx, k.due), p.ZCard(ctx, k.lease), p.HGet(ctx, k.ep, eBytes)
		return nil
	})
	if err != nil && err != redis.Nil {
		return 0, 0, s.wrap("backlog", err)
	}
	n, _ := strconv.ParseInt(b.Val(), 10, 64)
	return due.Val() + leased.Val(), n, nil
}
