package redisstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// drainBatch is how many callouts one drain script run dead-letters, so one
// script run stays short.
const drainBatch = 100

// Disable disables endpoint (contract §6: auto-disable after disable_after, or
// an admin): new callouts are refused with ErrDisabled, claims return
// GateDisabled, and every pending callout in a due set (scheduled or held;
// every queue) becomes a dead letter with reason
// endpoint_disabled, in batches of 100 per script run. With
// Options.Outbox, the owner notification and each dead letter's Salesforce
// writes are queued in the same scripts (proxy/redisstore/outbox). Callouts in flight
// finish with their worker; a retry of one becomes a dead letter then.
// Calling it again drains what remains. Errors: ErrUnavailable.
func (s *Store) Disable(ctx context.Context, endpoint, reason string) (policy.DisableResult, error) {
	return s.disable(ctx, endpoint, reason, 0)
}

// AutoDisable is Disable for auto-disable (contract §6), decided on
// Redis's clock, the one clock of shared state (contract §1): it disables
// endpoint only when its current outage (from the first counting failure
// after a success) began at least after (policy.disable_after) ago by
// Redis's TIME, else it returns the zero result and writes nothing. The
// caller's own check (policy.AutoDisable on the replica's clock) only
// saves the round trip. Errors: ErrUnavailable.
func (s *Store) AutoDisable(ctx context.Context, endpoint string, after time.Duration, reason string) (policy.DisableResult, error) {
	return s.disable(ctx, endpoint, reason, max(after, time.Millisecond))
}

// disable is Disable (after 0) and AutoDisable.
func (s *Store) disable(ctx context.Context, endpoint, reason string, after time.Duration) (policy.DisableResult, error) {
	home := keyspace.HomeQueue(endpoint)
	v, err := s.lua.disable.Run(ctx, s.rdb, &disableArgs{Endpoint: home.EndpointHash, SFO: home.SFO, Now: s.clockArg(s.now()),
		Reason: reason, Name: endpoint, Outbox: s.outbox, Can: s.canNotify(endpoint), After: after})
	if err != nil {
		return policy.DisableResult{}, s.wrap("disable", err)
	}
	if v.Early {
		return policy.DisableResult{}, nil
	}
	s.gates.Forget(endpoint)
	res := policy.DisableResult{Newly: v.Told == 1}
	if res.Newly {
		s.changed(endpoint) // disable.lua published it to the others
	}
	qs, err := s.queues.Orgs(ctx, endpoint, true)
	if err != nil {
		return res, err
	}
	for _, q := range qs {
		gs := ""
		if !q.Home {
			gs = string(policy.GateDisabled)
		}
		for {
			ids, err := s.rdb.ZRange(ctx, q.Due, 0, drainBatch-1).Result()
			if err != nil {
				return res, s.wrap("disable", err)
			}
			if len(ids) == 0 {
				break
			}
			moved, err := s.drain(ctx, q, ids, gs)
			res.DeadLettered = append(res.DeadLettered, moved...)
			if err != nil {
				return res, err
			}
			if len(moved) == 0 {
				break
			}
		}
	}
	return res, nil
}

// drain dead-letters the given due callouts of a disabled
// endpoint in queue q (drain.lua); gate is "" for the home queue (the
// script checks the endpoint hash) or the gate the caller read. It first
// reads the records (one pipelined round trip) to name their
// reservations in KEYS.
func (s *Store) drain(ctx context.Context, q queue, ids []string, gate string) ([]string, error) {
	reservations, err := s.reservationsOf(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	a := drainArgs{Counters: q.Counters, Due: q.Due, DL: q.DL, SFO: q.SFO, SFX: q.SFX, DLB: q.DLB,
		Now: s.clockArg(s.now()), DeadTTL: durMs(s.dlTTL), Outbox: s.outbox, Gate: gate}
	for i, id := range ids {
		c, rest, resp := q.Record(id)
		a.Callouts = append(a.Callouts, drainCallout{Record: c, Rest: rest, Resp: resp, Reservation: reservations[i], ID: id})
	}
	v, err := s.lua.drain.Run(ctx, s.rdb, &a)
	if err != nil {
		return nil, s.wrap("drain", err)
	}
	return v.Dead, nil
}

// disableArgs are disable.lua's keys and arguments (lua/disable.lua).
type disableArgs struct {
	Endpoint string        `lua:"endpoint,key"`
	SFO      string        `lua:"sfo,key"`
	Now      int64         `lua:"now"`
	Reason   string        `lua:"reason"`
	Name     string        `lua:"name"`
	Outbox   bool          `lua:"outbox"`
	Can      bool          `lua:"can"`
	After    time.Duration `lua:"after"`
}

// notifyArgs are notify.lua's keys and arguments (lua/notify.lua).
type notifyArgs struct {
	Endpoint string `lua:"endpoint,key"`
	SFO      string `lua:"sfo,key"`
	Now      int64  `lua:"now"`
	Name     string `lua:"name"`
	ID       string `lua:"id"`
	Outbox   bool   `lua:"outbox"`
	Reason   string `lua:"reason"`
	Can      bool   `lua:"can"`
}

// toldReply is the reply of disable.lua and notify.lua: 1 when the call
// did it (disabled the endpoint; tells the owner), else 0.
type toldReply struct {
	Told  int  `lua:"told"`
	Early bool `lua:"early"` // disable.lua: auto-disable not due on Redis's clock
}

// countReply is the reply of a script that answers a count (lock,
// lock, dl_prune).
type countReply struct {
	N int64 `lua:"n"`
}

// drainArgs are drain.lua's keys and arguments (lua/drain.lua names each);
// durations are ms in decimal.
type drainArgs struct {
	Counters string         `lua:"counters,key"`
	Due      string         `lua:"due,key"`
	DL       string         `lua:"dl,key"`
	SFO      string         `lua:"sfo,key"`
	SFX      string         `lua:"sfx,key"`
	DLB      string         `lua:"dlb,key"`
	Now      int64          `lua:"now"`
	DeadTTL  string         `lua:"dead_ttl"`
	Outbox   bool           `lua:"outbox"`
	Gate     string         `lua:"gate"`
	Callouts []drainCallout `lua:"callouts"`
}

// drainCallout is one due callout a drain dead-letters.
type drainCallout struct {
	Record      string `lua:"record,key"`
	Rest        string `lua:"rest,key"`
	Resp        string `lua:"resp,key"`
	Reservation string `lua:"reservation,key"`
	ID          string `lua:"id"`
}

// drainReply is drain.lua's reply: the ids dead-lettered.
type drainReply struct {
	Dead []string `lua:"dead"`
}

// Enable re-enables a disabled endpoint (contract §6 "Only an admin re-enables
// it") and gives it a fresh start: disable fields, breaker (every
// organisation's partition too), failure count, pause and outage are all
// cleared. Its dead letters stay; replay them. Callouts held behind the old
// gate become due now. One HKEYS and one HDEL, then the
// held-callout release; every replica's gate cache is told (keyspace.GateChannel).
// Errors: ErrUnavailable.
func (s *Store) Enable(ctx context.Context, endpoint string) error {
	if err := s.clearBreakers(ctx, endpoint, eDisabled, eDisReason, eDisAt, eOutage, eNotified); err != nil {
		return s.wrap("enable", err)
	}
	return s.gateReset(ctx, endpoint)
}

// CloseEndpointBreaker closes endpoint's own breaker and leaves every
// organisation's partition and the pause as they are: for an endpoint a
// reload opens to more organisations (contract §6). With one organisation
// its partition's opening opened the endpoint's breaker too (one open
// partition was enough: Options.OpenPartitions); once several may call
// it, that breaker would hold the newcomers for the failures of the one
// organisation alone, so it closes, and opens again when two partitions
// are open. Callouts held behind it become due (those of the failing
// partition are held by it again); every replica's gate cache is told.
// Errors: ErrUnavailable.
func (s *Store) CloseEndpointBreaker(ctx context.Context, endpoint string) error {
	if err := s.rdb.HDel(ctx, keyspace.Endpoint(endpoint), breakerFields...).Err(); err != nil {
		return s.wrap("close endpoint breaker", err)
	}
	return s.gateReset(ctx, endpoint)
}

// breakerFields are the fields of a breaker in an endpoint's hash: its own
// as they are, a partition's each followed by ":" and the issuer tag
// (lib.lua pf).
var breakerFields = []string{eBreaker, eFailures, eOpenedAt, eProbeAt, eProbeToken, eProbeUntil}

// gateReset tells every replica's gate cache that endpoint's gate was
// changed outside a script (keyspace.GateChannel) and makes the callouts
// held behind its old gate due. Errors: ErrUnavailable.
func (s *Store) gateReset(ctx context.Context, endpoint string) error {
	s.gates.Forget(endpoint)
	s.gateNotify(ctx, endpoint)
	_, err := s.held.Release(ctx, endpoint)
	return err
}

// clearBreakers deletes the fields of endpoint's own breaker and of every
// organisation's breaker partition (contract §6; lib.lua pf), the pause,
// and the fields more: one HKEYS and one HDEL.
func (s *Store) clearBreakers(ctx context.Context, endpoint string, more ...string) error {
	names, err := s.rdb.HKeys(ctx, keyspace.Endpoint(endpoint)).Result()
	if err != nil {
		return err
	}
	fields := append(append(slices.Clone(breakerFields), ePaused, "po"), more...)
	for _, n := range names {
		if f, _, ok := strings.Cut(n, ":"); ok && slices.Contains(breakerFields, f) {
			fields = append(fields, n)
		}
	}
	return s.rdb.HDel(ctx, keyspace.Endpoint(endpoint), fields...).Err()
}

// ResetBreaker closes endpoint's breaker and lifts its pause (calloutctl
// endpoints reset): state, failure count, opened/probe times, probe token
// and pause are cleared, of the endpoint's own breaker and of every
// organisation's partition (contract §6); the outage (if any) and the
// disable flag stay. Callouts held behind the breaker or the pause become
// due now. clearBreakers, then the held-callout release; every replica's gate cache is told
// (keyspace.GateChannel). Errors: ErrUnavailable.
func (s *Store) ResetBreaker(ctx context.Context, endpoint string) error {
	if err := s.clearBreakers(ctx, endpoint); err != nil {
		return s.wrap("reset breaker", err)
	}
	return s.gateReset(ctx, endpoint)
}
