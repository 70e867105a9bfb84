package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/redis/go-redis/v9"
)

// Begin creates a callout for the synchronous ingress (contract §4) and, in the
// same script, reserves its idempotency key (contract §5) and checks the gate
// and the backlog cap (create.lua). One round trip; two when the key is
// already reserved, and for a queue of a sharded endpoint whose gate is
// half-open (the probe token is taken first, admit.lua). Errors:
// ErrDisabled, ErrBacklogFull, ErrUnavailable.
func (s *Store) Begin(ctx context.Context, nc policy.NewCallout, opts policy.BeginOptions) (policy.BeginResult, error) {
	if opts.Lease <= 0 {
		return policy.BeginResult{}, fmt.Errorf("redisstore: begin: lease must be > 0")
	}
	br := opts.Breaker.WithDefaults(opts.Lease)
	token, err := s.token()
	if err != nil {
		return policy.BeginResult{}, err
	}
	now := s.now()
	rep, id, err := s.create(ctx, createInput{mode: "b", nc: nc, lim: opts.Limits, now: now,
		at: opts.Lease, probeLease: br.ProbeLease, token: token, br: br})
	if errors.Is(err, policy.ErrNotDurable) && rep.state == policy.InFlight {
		// Not confirmed durable: nothing is sent, so the callout leased to
		// this request is withdrawn at once (release.lua), not left for its
		// lease to lapse into a retry with an attempt that never went out
		// (contract §11). A record replicated before the withdrawal may
		// survive a failover; the caller's retry with the key finds it.
		cl := &policy.Claimed{ID: id, NewCallout: nc, Kind: rep.kind, LeaseToken: token}
		if rerr := s.Release(context.WithoutCancel(ctx), cl); rerr != nil {
			s.log.Warn("redisstore: withdrawing a callout not confirmed durable failed; its lease will lapse",
				"callout_id", id, "err", rerr)
		}
		return policy.BeginResult{}, err
	}
	if errors.Is(err, policy.ErrNotDurable) && rep.state == policy.Held {
		s.withdraw(context.WithoutCancel(ctx), nc, id) // a 202 held never given: as Enqueue's
		return policy.BeginResult{}, err
	}
	if err != nil || rep.existing != nil {
		return policy.BeginResult{Existing: rep.existing}, err
	}
	if rep.state == policy.Held {
		return policy.BeginResult{Held: &policy.HeldCallout{ID: id, Gate: rep.gate, DueAt: rep.at}}, nil
	}
	c := &policy.Claimed{
		ID: id, NewCallout: nc, Attempt: 1, Kind: rep.kind, LeaseToken: token, LeaseExpiresAt: rep.at,
		StartedAt: msTime(now), FirstAttemptAt: msTime(now), CreatedAt: msTime(now), DueAt: msTime(now),
	}
	return policy.BeginResult{Claimed: c}, nil
}

// Enqueue creates a callout whose first attempt the dispatcher makes
// (Prefer: respond-async, contract §4; a replay chain, contract §8), scheduled at
// opts.DueAt or held when the gate is shut. Same reservation, gate and cap
// checks as Begin; the first callout due in an empty queue wakes the
// dispatchers (keyspace cp:wake). With opts.DryRun the same script
// answers what it would do and writes nothing (a replay job's dry run: one
// copy of the rules); the result has no ID. Errors: ErrDisabled,
// ErrBacklogFull, ErrUnavailable.
func (s *Store) Enqueue(ctx context.Context, nc policy.NewCallout, opts policy.EnqueueOptions) (policy.EnqueueResult, error) {
	now := s.now()
	due := opts.DueAt
	if due.IsZero() || due.Before(now) {
		due = now
	}
	mode := "e"
	if opts.DryRun {
		mode = "d"
	}
	rep, id, err := s.create(ctx, createInput{mode: mode, nc: nc, lim: opts.Limits, now: now, at: due.Sub(now)})
	if errors.Is(err, policy.ErrNotDurable) && rep.existing == nil && id != "" {
		// Not confirmed durable: the caller is answered 503 and nothing may
		// be forwarded (contract §4, §11), so the callout is withdrawn while
		// no dispatcher has claimed it.
		s.withdraw(context.WithoutCancel(ctx), nc, id)
		return policy.EnqueueResult{}, err
	}
	if err != nil || rep.existing != nil {
		return policy.EnqueueResult{Existing: rep.existing}, err
	}
	if rep.dry {
		id = ""
	}
	return policy.EnqueueResult{ID: id, State: rep.state, Gate: rep.gate, DueAt: rep.at}, nil
}

// createInput is what Begin and Enqueue ask of one create.lua run.
type createInput struct {
	mode       string // "b" Begin, "e" Enqueue, "d" Enqueue's dry run
	nc         policy.NewCallout
	lim        policy.BacklogLimits
	now        time.Time
	at         time.Duration // from now: Begin's lease, Enqueue's due time
	probeLease time.Duration
	token      string
	br         policy.BreakerSettings
}

// createReply is a decoded create reply.
type createReply struct {
	existing *policy.Existing
	state    policy.State
	kind     policy.Kind
	gate     policy.Gate
	at       time.Time
	// dry: a dry run's answer (would_create); nothing was written.
	dry bool
}

// createArgs are create.lua's keys and arguments (lua/create.lua names
// each).
type createArgs struct {
	Record      string `lua:"record,key"`
	Rest        string `lua:"rest,key"`
	Due         string `lua:"due,key"`
	Lease       string `lua:"lease,key"`
	Counters    string `lua:"counters,key"`
	Reservation string `lua:"reservation,key"`

	Now            int64         `lua:"now"`
	Mode           string        `lua:"mode"`
	ID             string        `lua:"id"`
	Hold           string        `lua:"hold"`
	Stale          string        `lua:"stale"`
	Takeover       string        `lua:"takeover"`
	MaxItems       int64         `lua:"max_items"`
	MaxBytes       int64         `lua:"max_bytes"`
	MaxItemsIssuer int64         `lua:"max_items_issuer"`
	MaxBytesIssuer int64         `lua:"max_bytes_issuer"`
	Tag            string        `lua:"tag"`
	Part           string        `lua:"part"`
	Gate           string        `lua:"gate"`
	GateUntil      int64         `lua:"gate_until"`
	AtIn           int64         `lua:"at_in"`
	ProbeLease     int64         `lua:"probe_lease"`
	Token          string        `lua:"token"`
	RestQ          string        `lua:"rest_q"`
	Wake           string        `lua:"wake"`
	Retention      time.Duration `lua:"retention"`
	Fields         []string      `lua:"fields"`
	Charge         int64         `lua:"charge"`
	AckHold        time.Duration `lua:"ack_hold"`
}

// createResult is create.lua's reply.
type createResult struct {
	Result      string `lua:"result"`
	Holder      string `lua:"holder"`
	Fingerprint string `lua:"fingerprint"`
	State       string `lua:"state"`
	Kind        string `lua:"kind"`
	Gate        string `lua:"gate"`
	At          int64  `lua:"at"`
}

// fingerprint12 returns the first 12 bytes of the request's fingerprint
// (policy.Fingerprint), as its reservation stores it.
func fingerprint12(nc policy.NewCallout) string {
	sum := policy.FingerprintSum(nc.Method, nc.Path, nc.Query, nc.Body)
	return string(sum[:12])
}

// create runs create.lua. When the reservation points at a callout whose
// record is gone (both carry the same TTL, but expiry is not simultaneous),
// it retries once treating it as free.
func (s *Store) create(ctx context.Context, a createInput) (rep createReply, id string, err error) {
	nc := a.nc
	op := map[string]string{"b": "begin", "e": "enqueue", "d": "enqueue (dry run)"}[a.mode]
	if err := s.layoutReady(ctx); err != nil {
		return createReply{}, "", err
	}
	q, err := s.queues.ForCreate(ctx, nc)
	if err != nil {
		return createReply{}, "", err
	}
	id, err = s.newIDIn(q.Shard)
	if err != nil {
		return createReply{}, "", err
	}
	tag, err := s.issuers.Note(ctx, nc.Issuer)
	if err != nil {
		return createReply{}, "", err
	}
	q = q.ForOrg(tag, s.partition(nc.Endpoint, tag))
	view, given, err := s.gateOf(ctx, q)
	if err != nil {
		return createReply{}, "", err
	}
	if given && a.mode == "b" && view.Gate.State == policy.GateHalfOpen {
		// The probe token is on the endpoint hash, in another slot: take it
		// first (admit.lua); this callout is the probe when it got it. If it
		// is then not created (a duplicate, a refusal), the token goes back
		// at once, or no probe would run for the whole probe lease.
		if view, err = s.gates.TakeProbe(ctx, nc.Endpoint, q.Part, a.token, a.probeLease); err != nil {
			return createReply{}, "", err
		}
		if view.Gate.State == "probe" {
			defer func() {
				if rep.existing != nil || err != nil {
					if gerr := s.giveBackProbe(context.WithoutCancel(ctx), nc.Endpoint, q.Part, a.token); gerr != nil {
						s.log.Warn("redisstore: giving back a probe token failed", "endpoint", nc.Endpoint, "err", gerr)
					}
				}
			}()
		}
	}
	raw12 := fingerprint12(nc)
	fields, restQ := record.New(nc, a.now)
	charge := record.Charge(fields, restQ)
	fields = append(fields, record.FieldCharged, strconv.FormatInt(charge, 10))
	if tag != "" {
		fields = append(fields, record.FieldIssuer, tag)
	}
	c, rest, _ := q.Record(id)
	res := reservationKey(q, c, nc.Issuer, nc.IdempotencyKey)
	lim := a.lim
	if n := s.Shards(nc.Endpoint); n > 1 {
		lim = perQueue(lim, n)
	}
	args := createArgs{Record: c, Rest: rest, Due: q.Due, Lease: q.Lease, Counters: q.Counters, Reservation: res, Part: q.Part,
		Now: s.clockArg(a.now), Mode: a.mode, ID: id, Hold: keyspace.RawOfID(id) + raw12, Takeover: keyspace.RawOfID(nc.ReplayOf),
		MaxItems: lim.MaxItems, MaxBytes: lim.MaxBytes, MaxItemsIssuer: lim.MaxItemsPerIssuer,
		MaxBytesIssuer: lim.MaxBytesPerIssuer, Tag: tag, AtIn: a.at.Milliseconds(), ProbeLease: a.probeLease.Milliseconds(),
		Token: a.token, RestQ: restQ, Wake: keyspace.WakeChannel, Retention: s.idemTTL, Fields: fields, Charge: charge}
	if given {
		args.Gate, args.GateUntil = string(view.Gate.State), msOf(view.Gate.Until)
	}
	if s.acks != nil {
		args.AckHold = ackHold
	}
	for range 2 {
		v, err := s.lua.create.Run(ctx, s.rdb, &args)
		if err != nil {
			return createReply{}, "", s.wrap(op, err)
		}
		rep, holder, err := s.decodeCreate(ctx, op, v, q, raw12, a.now)
		if err == nil && holder == "" && !rep.dry && s.acks != nil {
			// Durable before the caller is answered (contract §11).
			if err = s.acks.Ack(ctx, c); err == nil && rep.existing == nil && rep.state != policy.InFlight {
				s.unhold(context.WithoutCancel(ctx), q, c, id, rep.at, a.at <= 0 && rep.state == policy.Scheduled)
			}
		}
		if err != nil || holder == "" {
			if err == nil && rep.existing == nil && !rep.dry {
				s.remember(ctx, nc.Endpoint)
				s.queues.NoteOrg(nc.Endpoint, q.Shard, tag)
			}
			return rep, id, err
		}
		args.Stale = keyspace.RawOfID(holder)
	}
	return createReply{}, "", fmt.Errorf("redisstore: %s: reservation points at a vanished callout twice", op)
}

// ackHold is how far ahead create.lua queues a callout for the dispatcher
// while its durable acknowledgement is out (createArgs.AckHold): longer
// than any acknowledgement round (redis.durability_timeout, at most 10 s,
// plus a second), so that no dispatcher claims — and forwards — a callout
// whose caller may yet be answered 503 (contract §4, §11).
const ackHold = 15 * time.Second

// unhold moves a callout create.lua held back for its acknowledgement
// (ackHold) to its due time at, and wakes the dispatchers when it is due
// now, first dropping its record's mark (record.FieldAckHold) that keeps
// hold/lua/park.lua off it. One round trip. If it fails the callout is only
// late: due when the hold runs out.
func (s *Store) unhold(ctx context.Context, q queue, c, id string, at time.Time, wake bool) {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, c, record.FieldAckHold)
		p.ZAddArgs(ctx, q.Due, redis.ZAddArgs{XX: true, LT: true, Members: []redis.Z{{Score: float64(at.UnixMilli()), Member: id}}})
		if wake {
			p.Publish(ctx, keyspace.WakeChannel, id)
		}
		return nil
	})
	if err != nil {
		s.log.Warn("redisstore: a confirmed callout stays held back until its hold ends", "callout_id", id,
			"hold", ackHold, "err", err)
	}
}

// perQueue is one queue's share of an endpoint's backlog caps when it is
// spread over n queues (proxy/redisstore/queues): each cap / n, rounded up.
func perQueue(l policy.BacklogLimits, n int) policy.BacklogLimits {
	div := func(v int64) int64 {
		if v <= 0 {
			return v
		}
		return (v + int64(n) - 1) / int64(n)
	}
	return policy.BacklogLimits{MaxItems: div(l.MaxItems), MaxBytes: div(l.MaxBytes),
		MaxItemsPerIssuer: div(l.MaxItemsPerIssuer), MaxBytesPerIssuer: div(l.MaxBytesPerIssuer)}
}

// decodeCreate decodes a create.lua reply. holder is set (and the reply
// empty) when the reservation's holder has no record any more.
func (s *Store) decodeCreate(ctx context.Context, op string, v createResult, q queue, raw12 string, now time.Time) (rep createReply, holder string, err error) {
	switch v.Result {
	case "disabled":
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, policy.ErrDisabled)
	case "backlog_full":
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, policy.ErrBacklogFull)
	case "issuer_backlog_full":
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, policy.ErrIssuerBacklogFull)
	case "exists":
		id := keyspace.IDOfRaw(q.Shard, v.Holder)
		ex, err := s.existing(ctx, id, v.Fingerprint == raw12, now)
		if err != nil || ex == nil {
			return rep, id, err
		}
		return createReply{existing: ex}, "", nil
	case "created", "would_create":
		rep.dry = v.Result == "would_create"
		rep.state = policy.State(v.State)
		rep.at = time.UnixMilli(v.At)
		if rep.state == policy.InFlight {
			rep.kind = policy.Kind(v.Kind)
			rep.gate = policy.Gate{State: policy.GateOpen}
			if rep.kind == policy.KindProbe {
				rep.gate = policy.Gate{State: policy.GateHalfOpen}
			}
		} else {
			rep.gate = policy.Gate{State: policy.GateState(v.Gate)}
			if rep.gate.State == "probe" {
				rep.gate.State = policy.GateHalfOpen
			}
			if rep.gate.Shut() {
				rep.gate.Until = rep.at
			}
		}
		return rep, "", nil
	}
	return rep, "", fmt.Errorf("redisstore: %s: unexpected reply %+v", op, v)
}

// existing reads the callout holding a reservation; nil when it is gone.
func (s *Store) existing(ctx context.Context, id string, same bool, now time.Time) (*policy.Existing, error) {
	c, err := s.Get(ctx, id)
	if errors.Is(err, policy.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ex := &policy.Existing{ID: id, SameRequest: same, Callout: c}
	ex.LeaseExpired = c.State == policy.InFlight && !c.LeaseExpiresAt.After(now)
	return ex, nil
}

// msTime truncates t to the millisecond, as stored.
func msTime(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
