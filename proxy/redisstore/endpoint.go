package redisstore

import (
	"context"
	"strconv"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/redis/go-redis/v9"
)

// EndpointState reads endpoint's state: which organisations have queues
// (one pipelined round trip, queues.Tracker.Orgs), then one more (its
// endpoint hash and the sizes of its due, lease and dead-letter sets, of
// every queue, keyspace), then the gate (gateview's gate_read.lua).
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
	v, br, parts, err := s.gates.State(ctx, endpoint)
	if err != nil {
		return policy.EndpointState{}, err
	}
	st := policy.EndpointState{
		Endpoint: endpoint, Gate: v.Gate, Breaker: policy.BreakerState(br),
		ConsecutiveFailures: atoi(m[eFailures]), OpenedAt: record.ParseMs(m[eOpenedAt]),
		ProbeAt: record.ParseMs(m[eProbeAt]), ProbeUntil: record.ParseMs(m[eProbeUntil]),
		PausedUntil: record.ParseMs(m[ePaused]), Disabled: m[eDisabled] == "1",
		DisabledReason: m[eDisReason], DisabledAt: record.ParseMs(m[eDisAt]),
		LastSuccessAt: record.ParseMs(m[eLastOK]), OutageStartedAt: record.ParseMs(m[eOutage]),
		OutageNotified: m[eNotified] == "1", Due: counts.due, Leased: counts.leased,
		DeadLetters: counts.dead, BacklogBytes: counts.bytes + int64(atoi(m[eBytes])),
	}
	st.ProbeOut = m[eProbeToken] != "" && st.ProbeUntil.After(now)
	for _, p := range parts {
		ps := policy.PartitionState{Issuer: s.issuers.Of(ctx, p.Tag), Breaker: policy.BreakerState(p.Breaker),
			ConsecutiveFailures: p.Failures, OpenedAt: msTimeOf(p.OpenedAt)}
		if ps.Breaker != policy.BreakerClosed {
			ps.ProbeAt = msTimeOf(p.ProbeAt)
		}
		if ps.Issuer == "" {
			ps.Issuer = p.Tag
		}
		st.Partitions = append(st.Partitions, ps)
	}
	return st, nil
}

// pending are an endpoint's pending items and their charged bytes, over
// every queue (the home queue's bytes are in the endpoint
// hash and not counted here).
type pending struct {
	due, leased, dead, bytes int64
}

// pendingCounts reads pending in one pipeline, with more commands of the
// caller's (extra) in the same round trip, after reading which
// organisations have queues (fresh: one organisation's first callout made
// by another replica a moment ago counts).
func (s *Store) pendingCounts(ctx context.Context, endpoint string, extra func(p redis.Pipeliner)) (pending, error) {
	qs, err := s.queues.Of(ctx, endpoint)
	if err != nil {
		return pending{}, err
	}
	oqs, err := s.queues.Orgs(ctx, endpoint, true)
	if err != nil {
		return pending{}, err
	}
	var due, leased, dead []*redis.IntCmd
	var bytes []*redis.StringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if extra != nil {
			extra(p)
		}
		for _, q := range oqs {
			due = append(due, p.ZCard(ctx, q.Due))
			leased = append(leased, p.ZCard(ctx, q.Lease))
		}
		for _, q := range qs {
			dead = append(dead, p.ZCard(ctx, q.DL))
			if !q.Home {
				bytes = append(bytes, p.HGet(ctx, q.Counters, eBytes))
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

// ReadGates reads the gates of endpoints (names: an endpoint, or
// keyspace.PartitionGate's "endpoint/issuer" for an organisation's breaker
// partition) now as lib.lua computes them
// (gateview's gate_read.lua each, on the scripts' clock, in one pipeline: one round
// trip per Redis node), for
// a reader that keeps them (the gate cache, proxy/redisstore/gatecache,
// ARCHITECTURE.md "Hot-path budget"). gates[i] is endpoints[i]'s gate as a
// read would be admitted by it — Gate and ConsecutiveFailures; ProbeToken
// is never set (nothing is taken: a half-open breaker reads GateHalfOpen)
// — Gate.Partition the issuer when the gate is its partition's —
// and errs[i] its error, when it could not be read (ErrUnavailable, or a
// reply the code does not understand); gates[i] is then zero.
func (s *Store) ReadGates(ctx context.Context, endpoints []string) (gates []policy.Admission, errs []error) {
	calls := make([]*gateview.Pending, len(endpoints))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ep := range endpoints {
			name, issuer := keyspace.SplitGate(ep)
			calls[i] = s.gates.Queue(ctx, p, name, s.partition(name, keyspace.IssuerTag(issuer)))
		}
		return nil
	})
	gates, errs = make([]policy.Admission, len(endpoints)), make([]error, len(endpoints))
	for i, c := range calls {
		v, err := c.Result(ctx)
		if err != nil {
			errs[i] = err
			continue
		}
		gates[i] = policy.Admission{Gate: v.Gate, ConsecutiveFailures: v.Failures}
		if _, issuer := keyspace.SplitGate(endpoints[i]); v.Level != "" {
			gates[i].Gate.Partition = issuer
		}
	}
	return gates, errs
}

// Backlog returns endpoint's pending items (due + leased callouts, every
// queue) and the bytes they and its dead letters are charged:
// the figures the backlog caps (Limits) compare. Two pipelined round
// trips (pendingCounts).
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

// Fields of the endpoint hash cp:{sN}:ep:{ep}. Absent means zero/false.
const (
	eBreaker    = "bs"  // "open" or absent (closed); half_open = open and now >= pa
	eFailures   = "cf"  // consecutive counting failures
	eOpenedAt   = "oa"  // ms the breaker opened, written once by the opener
	eProbeAt    = "pa"  // ms the open breaker admits its probe
	eProbeToken = "pt"  // lease token of the callout (or read) holding the probe
	eProbeUntil = "pe"  // ms the probe token expires
	ePaused     = "pu"  // ms until which the endpoint is paused (429 Retry-After)
	eDisabled   = "dis" // "1" when disabled
	eDisReason  = "dr"  // why it was disabled
	eDisAt      = "dat" // ms it was disabled
	eLastOK     = "lsu" // ms of the success that last ended a failure streak
	eOutage     = "os"  // ms of the first counting failure after a success
	eNotified   = "on"  // "1" once the owner heard of the current outage
	eBytes      = "bb"  // bytes charged by pending callouts and dead letters
	ePending    = "bi"  // pending items (scheduled, held, in flight)
)
