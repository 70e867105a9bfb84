package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// BreakerState is a circuit breaker's state (SPEC §6).
type BreakerState string

// The breaker states. Stored as "open" or nothing; half_open is an open
// breaker whose probe time has come.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// EndpointState is an endpoint's shared state (the cp:{sN}:ep hash) and its
// queue sizes, as read at one moment.
type EndpointState struct {
	Endpoint string
	// Gate is what a claim would see now.
	Gate Gate
	// Breaker is closed, open or half_open.
	Breaker BreakerState
	// ConsecutiveFailures counts counting failures since the last success.
	ConsecutiveFailures int
	// OpenedAt is when the breaker opened (written once by the opener).
	OpenedAt time.Time
	// ProbeAt is when the open breaker admits its probe.
	ProbeAt time.Time
	// ProbeOut is true while a probe holds the token, until ProbeUntil.
	ProbeOut   bool
	ProbeUntil time.Time
	// PausedUntil is the end of an endpoint-wide 429 pause (may be past).
	PausedUntil time.Time
	// Disabled, with its reason and time (SPEC §6 auto-disable or admin).
	Disabled       bool
	DisabledReason string
	DisabledAt     time.Time
	// LastSuccessAt is the success that last ended a failure streak (a
	// success while nothing fails writes nothing, so it can be older than
	// the latest success).
	LastSuccessAt time.Time
	// OutageStartedAt is the first counting failure after a success (zero:
	// no outage); auto-disable measures disable_after from it.
	OutageStartedAt time.Time
	// OutageNotified is true once the owner heard of the current outage.
	OutageNotified bool
	// Due (scheduled and held), Leased (in flight) and DeadLetters (index
	// entries) are queue sizes; BacklogBytes sums pending request bodies.
	Due, Leased, DeadLetters int64
	BacklogBytes             int64
}

// EndpointState reads endpoint's state: one pipelined round trip (HGETALL
// and three ZCARDs). Errors: ErrUnavailable.
func (s *Store) EndpointState(ctx context.Context, endpoint string) (EndpointState, error) {
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
		return EndpointState{}, s.wrap("endpoint state", err)
	}
	m := h.Val()
	st := EndpointState{
		Endpoint: endpoint, Gate: gateFromHash(m, now), Breaker: BreakerClosed,
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
		st.Breaker = BreakerOpen
		if !st.ProbeAt.After(now) {
			st.Breaker = BreakerHalfOpen
		}
	}
	return st, nil
}

// gateFromHash computes the gate from an endpoint hash exactly as
// lib.lua's gate() does.
func gateFromHash(m map[string]string, now time.Time) Gate {
	nowMs := now.UnixMilli()
	at := func(f string) int64 { n, _ := strconv.ParseInt(m[f], 10, 64); return n }
	switch {
	case m[eDisabled] == "1":
		return Gate{State: GateDisabled}
	case at(ePaused) > nowMs:
		return Gate{State: GatePaused, Until: time.UnixMilli(at(ePaused))}
	case m[eBreaker] != "open":
		return Gate{State: GateOpen}
	case at(eProbeAt) > nowMs:
		return Gate{State: GateBreakerOpen, Until: time.UnixMilli(at(eProbeAt))}
	case m[eProbeToken] != "" && at(eProbeUntil) > nowMs:
		return Gate{State: GateProbing, Until: time.UnixMilli(at(eProbeUntil))}
	}
	return Gate{State: GateHalfOpen}
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
