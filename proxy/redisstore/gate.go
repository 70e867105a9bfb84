package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// outcomeArgs are outcome.lua's keys and arguments (lua/outcome.lua names
// each); durations are ms.
type outcomeArgs struct {
	Endpoint  string   `lua:"endpoint,key"`
	Due       []string `lua:"due,key"`
	Now       int64    `lua:"now"`
	Probe     string   `lua:"probe"`
	Success   bool     `lua:"success"`
	Counts    bool     `lua:"counts"`
	Threshold int      `lua:"threshold"`
	ProbeIn   int64    `lua:"probe_in"`
	Pause     int64    `lua:"pause"`
	Part      string   `lua:"part"`
	Quorum    int      `lua:"quorum"`
}

// outcomeReply is outcome.lua's reply.
type outcomeReply struct {
	Opened   bool   `lua:"opened"`
	Closed   bool   `lua:"closed"`
	Began    bool   `lua:"began"`
	Ended    bool   `lua:"ended"`
	Failures int    `lua:"failures"`
	OutageAt int64  `lua:"outage_at"`
	Probe    bool   `lua:"probe"`
	Held     int    `lua:"held"`
	Gate     string `lua:"gate"`
	// as completeOne's
	Shut      bool   `lua:"shut"`
	GateUntil int64  `lua:"gate_until"`
	Level     string `lua:"level"`
}

// change is the breaker change the reply reports.
func (r outcomeReply) change() policy.BreakerChange {
	return policy.BreakerChange{Opened: r.Opened, Closed: r.Closed, OutageBegan: r.Began, OutageEnded: r.Ended,
		Probe: r.Probe, ConsecutiveFailures: r.Failures, OutageStartedAt: msTimeOf(r.OutageAt),
		Held: r.Held, HeldBy: policy.GateState(r.Gate)}
}

// giveBack is the outcome of a probe that made no attempt: the token is
// released, the breaker unchanged.
func (s *Store) giveBack(endpoint, part, token string, now time.Time) *outcomeArgs {
	return &outcomeArgs{Endpoint: keyspace.Endpoint(endpoint), Now: s.clockArg(now), Probe: token,
		Threshold: 1, Part: part}
}

// Admit checks the gate for a request without a callout record and,
// when the breaker is half-open and the probe token free, gives the token to
// this request (contract §6 "the first request or held callout that takes the
// single probe token"). name is the endpoint, or keyspace.PartitionGate's
// "endpoint/issuer" of the caller's organisation: where the endpoint's breaker
// is partitioned by organisation (Options.Partitioned) the request meets,
// and probes, that organisation's breaker as well as the endpoint's
// (contract §6); the gate's Partition is the issuer when the gate is that
// partition's. br.ProbeLease must be > 0 (the request's attempt
// limit plus a grace period). One round trip (gateview's admit.lua), always; the gate
// cache (proxy/redisstore/gatecache) wraps it, keeping its replies, and
// answers from memory when it can (ARCHITECTURE.md "Hot-path budget").
// Errors: ErrUnavailable.
func (s *Store) Admit(ctx context.Context, name string, br policy.BreakerSettings) (policy.Admission, error) {
	endpoint, issuer := keyspace.SplitGate(name)
	tag := keyspace.IssuerTag(issuer)
	if br.ProbeLease <= 0 {
		return policy.Admission{}, fmt.Errorf("redisstore: admit: probe lease must be > 0")
	}
	tok, err := s.token()
	if err != nil {
		return policy.Admission{}, err
	}
	a, err := s.gates.Admit(ctx, endpoint, s.partition(endpoint, tag), tok, br.ProbeLease)
	if err != nil {
		return policy.Admission{}, err
	}
	ad := policy.Admission{Gate: a.Gate, ConsecutiveFailures: a.Failures}
	if ad.Gate.State == "probe" {
		ad.Gate, ad.ProbeToken = policy.Gate{State: policy.GateHalfOpen}, tok
	}
	if a.Level != "" {
		ad.Gate.Partition = issuer
	}
	return ad, nil
}

// RecordResult applies a read's result to the breaker and pause exactly
// as Complete does for a callout (outcome.lua); name is Admit's (the
// endpoint, or "endpoint/issuer" of the caller's organisation). Skip it for a
// success when Admission.ConsecutiveFailures was 0 and there was no probe
// token. Errors: ErrUnavailable.
func (s *Store) RecordResult(ctx context.Context, name string, r policy.ReadResult) (policy.BreakerChange, error) {
	endpoint, issuer := keyspace.SplitGate(name)
	// the issuer's tag is what a partition is shown by (EndpointState)
	tag, err := s.issuers.Note(ctx, issuer)
	if err != nil {
		return policy.BreakerChange{}, err
	}
	now := s.now()
	br := r.Breaker.WithDefaults(time.Minute)
	pause := msUntil(r.PausedUntil, now)
	home := keyspace.HomeQueue(endpoint)
	var due []string
	qs, err := s.queues.Orgs(ctx, endpoint, false)
	if err != nil {
		return policy.BreakerChange{}, err
	}
	for _, q := range qs {
		if q.Home {
			due = append(due, q.Due)
		}
	}
	v, err := s.lua.outcome.Run(ctx, s.rdb, &outcomeArgs{Endpoint: home.EndpointHash, Due: due,
		Now: s.clockArg(now), Probe: r.ProbeToken, Success: r.Success, Counts: r.CountsTowardBreaker,
		Threshold: br.Failures, ProbeIn: br.ProbeInterval.Milliseconds(), Pause: pause,
		Part: s.partition(endpoint, tag), Quorum: s.quorum(endpoint)})
	if err != nil {
		return policy.BreakerChange{}, s.wrap("record result", err)
	}
	ch := v.change()
	if s.partition(endpoint, tag) != "" {
		ch.Partition = issuer
	}
	s.gateChanged(ctx, endpoint, ch, pause > 0, shutGate{v.Shut, v.GateUntil, v.Level})
	return ch, nil
}

// gateChanged tells Options.GateChanged of a transition of endpoint's gate
// this replica's own script reported (the breaker opened, closed or took a
// probe, an outage began or ended, a pause), so a gate cache's next read
// asks Redis without waiting for its own message; when the result shut the
// gate, it then holds the waiting callouts behind it, and when it closed a
// breaker, releases those it held (package hold).
func (s *Store) gateChanged(ctx context.Context, endpoint string, ch policy.BreakerChange, paused bool, sg shutGate) {
	if paused || ch.Opened || ch.Closed || ch.OutageBegan || ch.OutageEnded || ch.Probe {
		s.changed(endpoint)
	}
	switch {
	case sg.shut:
		if _, err := s.held.Hold(ctx, endpoint, sg.level, sg.until); err != nil {
			s.log.Warn("redisstore: the callouts a shut gate holds were not all marked held; their records say scheduled",
				"endpoint", endpoint, "err", err)
		}
	case ch.Closed:
		// a success closed a breaker: what it held waits no more
		if _, err := s.held.Release(ctx, endpoint); err != nil {
			s.log.Warn("redisstore: the callouts a closed breaker held were not all released; they are due at its old reopening",
				"endpoint", endpoint, "err", err)
		}
	}
}

// changed calls Options.GateChanged, if set.
func (s *Store) changed(endpoint string) {
	if s.onGate != nil {
		s.onGate(endpoint)
	}
}

// gateNotify tells every replica that endpoint's gate changed by plain
// commands (not a script, which calls gate_changed itself): this one by
// Options.GateChanged, the others by a PUBLISH on keyspace.GateChannel. A
// failed PUBLISH is logged: the change is made, and the other replicas'
// gate caches see it at their next poll.
func (s *Store) gateNotify(ctx context.Context, endpoint string) {
	s.changed(endpoint)
	if err := s.rdb.Publish(ctx, keyspace.GateChannel, keyspace.Endpoint(endpoint)).Err(); err != nil {
		s.log.Warn("redisstore: gate change not published; other replicas see it at their next poll",
			"endpoint", endpoint, "err", err)
	}
}
