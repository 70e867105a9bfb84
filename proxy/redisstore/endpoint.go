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
	st := policy.EndpointState{
		Endpoint: endpoint, Gate: gateFromHash(m, now), Breaker: policy.BreakerClosed,
		ConsecutiveFailures: atoi(m[eFailures]), OpenedAt: fromMs(m[eOpenedAt]),
		ProbeAt: fromMs(m[eProbeAt]), ProbeUntil: fromMs(m[eProbeUntil]),
		PausedUntil: fromMs(m[ePaused]), Disabled: m[eDisabled] == "1",
		DisabledReason: m[eDisReason], DisabledAt: fromMs(m[eDisAt]),
		LastSuccessAt: fromMs(m[eLastOK]), OutageStartedAt: fromMs(m[eOutage]),
		OutageNotified: m[eNotified] == "1", Due: due.Val(), Leased: leased.Val(),
		DeadLetters: dl.Val(), BacklogBytes: int64(atoi(m[eBytes])),
	}
	st.ProbeOut = m[eProbeToken] != "" && st.ProbeUntil.After(now)
	if m[eBreaker] == "open" {
		st.Breaker = policy.BreakerOpen
		if !st.ProbeAt.After(now) {
			st.Breaker = policy.BreakerHalfOpen
		}
	}
	return st, nil
}

// gateFromHash computes the gate from an endpoint hash exactly as
// lib.lua's gate() does.
func gateFromHash(m map[string]string, now time.Time) policy.Gate {
	nowMs := now.UnixMilli()
	at := func(f string) int64 { n, _ := strconv.ParseInt(m[f], 10, 64); return n }
	switch {
	case m[eDisabled] == "1":
		return policy.Gate{State: policy.GateDisabled}
	case at(ePaused) > nowMs:
		return policy.Gate{State: policy.GatePaused, Until: time.UnixMilli(at(ePaused))}
	case m[eBreaker] != "open":
		return policy.Gate{State: policy.GateOpen}
	case at(eProbeAt) > nowMs:
		return policy.Gate{State: policy.GateBreakerOpen, Until: time.UnixMilli(at(eProbeAt))}
	case m[eProbeToken] != "" && at(eProbeUntil) > nowMs:
		return policy.Gate{State: policy.GateProbing, Until: time.UnixMilli(at(eProbeUntil))}
	}
	return policy.Gate{State: policy.GateHalfOpen}
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
