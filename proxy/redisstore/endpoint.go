package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
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
	v, err := s.lua.gateRead.Run(ctx, s.rdb, &gateReadArgs{Endpoint: keyspace.Endpoint(endpoint), Now: s.clockArg(now), List: true})
	if err != nil {
		return policy.EndpointState{}, s.wrap("gate_read", err)
	}
	g, br := v.gateOf(), policy.BreakerState(v.Breaker)
	st := policy.EndpointState{
		Endpoint: endpoint, Gate: g, Breaker: br,
		ConsecutiveFailures: atoi(m[eFailures]), OpenedAt: record.ParseMs(m[eOpenedAt]),
		ProbeAt: record.ParseMs(m[eProbeAt]), ProbeUntil: record.ParseMs(m[eProbeUntil]),
		PausedUntil: record.ParseMs(m[ePaused]), Disabled: m[eDisabled] == "1",
		DisabledReason: m[eDisReason], DisabledAt: record.ParseMs(m[eDisAt]),
		LastSuccessAt: record.ParseMs(m[eLastOK]), OutageStartedAt: record.ParseMs(m[eOutage]),
		OutageNotified: m[eNotified] == "1", Due: counts.due, Leased: counts.leased,
		DeadLetters: counts.dead, BacklogBytes: counts.bytes + int64(atoi(m[eBytes])),
	}
	st.ProbeOut = m[eProbeToken] != "" && st.ProbeUntil.After(now)
	for _, p := range v.Partitions {
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
// caller's (extra) in the same round trip.
func (s *Store) pendingCounts(ctx context.Context, endpoint string, extra func(p redis.Pipeliner)) (pending, error) {
	qs, err := s.queuesOf(ctx, endpoint)
	if err != nil {
		return pending{}, err
	}
	oqs, err := s.orgQueuesOf(ctx, endpoint, false)
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

// gateReadArgs are gate_read.lua's keys and arguments (lua/gate_read.lua).
type gateReadArgs struct {
	Endpoint string `lua:"endpoint,key"`
	Now      int64  `lua:"now"`
	Part     string `lua:"part"`
	List     bool   `lua:"list"`
}

// gateReadReply is gate_read.lua's reply.
type gateReadReply struct {
	Gate      string `lua:"gate"`
	GateUntil int64  `lua:"gate_until"`
	Level     string `lua:"level"`
	Breaker   string `lua:"breaker"`
	Failures  int    `lua:"failures"`
	// Partitions are the breaker partitions (with List).
	Partitions []partitionReply `lua:"partitions"`
}

// partitionReply is one breaker partition of gate_read.lua's reply.
type partitionReply struct {
	Tag      string `lua:"tag"`
	Breaker  string `lua:"breaker"`
	Failures int    `lua:"failures"`
	OpenedAt int64  `lua:"opened_at"`
	ProbeAt  int64  `lua:"probe_at"`
}

// gateOf is the gate a gate_read.lua reply reports.
func (r gateReadReply) gateOf() policy.Gate {
	return policy.Gate{State: policy.GateState(r.Gate), Until: msTimeOf(r.GateUntil)}
}

// readGate queues gate_read.lua for endpoint's breaker partition part at
// now (the script's clock, Options.PinScriptTime) in p.
func (s *Store) readGate(ctx context.Context, p redis.Pipeliner, endpoint, part string, now time.Time) *script.Call[gateReadArgs, gateReadReply] {
	return s.lua.gateRead.Queue(ctx, p, &gateReadArgs{Endpoint: keyspace.Endpoint(endpoint), Now: s.clockArg(now), Part: part})
}

// gateRead is the gate view of endpoint's breaker partition part now.
func (s *Store) gateRead(ctx context.Context, endpoint, part string, now time.Time) (gateView, error) {
	v, err := s.lua.gateRead.Run(ctx, s.rdb, &gateReadArgs{Endpoint: keyspace.Endpoint(endpoint), Now: s.clockArg(now), Part: part})
	if err != nil {
		return gateView{}, s.wrap("gate_read", err)
	}
	return v.view(), nil
}

// view is the gate view a gate_read.lua reply reports.
func (r gateReadReply) view() gateView {
	return gateView{gate: r.gateOf(), failures: r.Failures, level: r.Level}
}

// ReadGates reads the gates of endpoints (names: an endpoint, or
// keyspace.PartitionGate's "endpoint/issuer" for an organisation's breaker
// partition) now as lib.lua computes them
// (gate_read.lua each, on the scripts' clock, in one pipeline: one round
// trip per Redis node), for
// a reader that keeps them (the gate cache, proxy/redisstore/gatecache,
// ARCHITECTURE.md "Hot-path budget"). gates[i] is endpoints[i]'s gate as a
// read would be admitted by it — Gate and ConsecutiveFailures; ProbeToken
// is never set (nothing is taken: a half-open breaker reads GateHalfOpen)
// — Gate.Partition the issuer when the gate is its partition's —
// and errs[i] its error, when it could not be read (ErrUnavailable, or a
// reply the code does not understand); gates[i] is then zero.
func (s *Store) ReadGates(ctx context.Context, endpoints []string) (gates []policy.Admission, errs []error) {
	now := s.now()
	calls := make([]*script.Call[gateReadArgs, gateReadReply], len(endpoints))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ep := range endpoints {
			name, issuer := keyspace.SplitGate(ep)
			calls[i] = s.readGate(ctx, p, name, s.partition(name, keyspace.IssuerTag(issuer)), now)
		}
		return nil
	})
	gates, errs = make([]policy.Admission, len(endpoints)), make([]error, len(endpoints))
	for i, c := range calls {
		v, err := c.Result(ctx, s.rdb)
		if err != nil {
			errs[i] = s.wrap("gate_read", err)
			continue
		}
		gates[i] = policy.Admission{Gate: v.gateOf(), ConsecutiveFailures: v.Failures}
		if _, issuer := keyspace.SplitGate(endpoints[i]); v.Level != "" {
			gates[i].Gate.Partition = issuer
		}
	}
	return gates, errs
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
	eShards     = "sq"  // shard counts the endpoint was served with, "1,3" (shards.go)
)
