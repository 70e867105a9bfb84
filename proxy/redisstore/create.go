package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Begin creates a callout for the synchronous ingress (SPEC §4) and, in the
// same script, reserves its idempotency key (SPEC §5) and checks the gate
// and the backlog cap. One round trip; two when the key is already
// reserved. Errors: ErrDisabled, ErrBacklogFull, ErrUnavailable.
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
	extra := []any{msArg(now.Add(opts.Lease)), msArg(now.Add(br.ProbeLease)), token}
	rep, id, err := s.create(ctx, "begin", nc, opts.Limits, now, extra)
	if err != nil || rep.existing != nil {
		return policy.BeginResult{Existing: rep.existing}, err
	}
	if rep.state == policy.Held {
		return policy.BeginResult{Held: &policy.HeldCallout{ID: id, Gate: rep.gate, DueAt: rep.at}}, nil
	}
	c := &policy.Claimed{
		ID: id, Endpoint: nc.Endpoint, Issuer: nc.Issuer, Method: nc.Method, Path: nc.Path,
		Query: nc.Query, Header: nc.Header, Body: nc.Body, IdempotencyKey: nc.IdempotencyKey,
		SourceRecord: nc.SourceRecord, Attempt: 1, Kind: rep.kind, LeaseToken: token,
		LeaseExpiresAt: rep.at, StartedAt: msTime(now), FirstAttemptAt: msTime(now),
		CreatedAt: msTime(now), DueAt: msTime(now), TraceContext: nc.TraceContext,
	}
	return policy.BeginResult{Claimed: c}, nil
}

// Enqueue creates a callout whose first attempt the dispatcher makes
// (Prefer: respond-async, SPEC §4; a replay chain, SPEC §8), scheduled at
// opts.DueAt or held when the gate is shut. Same reservation, gate and cap
// checks as Begin. Errors: ErrDisabled, ErrBacklogFull, ErrUnavailable.
func (s *Store) Enqueue(ctx context.Context, nc policy.NewCallout, opts policy.EnqueueOptions) (policy.EnqueueResult, error) {
	now := s.now()
	due := opts.DueAt
	if due.IsZero() || due.Before(now) {
		due = now
	}
	rep, id, err := s.create(ctx, "enqueue", nc, opts.Limits, now, []any{msArg(due), nc.ReplayOf})
	if err != nil || rep.existing != nil {
		return policy.EnqueueResult{Existing: rep.existing}, err
	}
	return policy.EnqueueResult{ID: id, State: rep.state, Gate: rep.gate, DueAt: rep.at}, nil
}

// createReply is a decoded begin/enqueue reply.
type createReply struct {
	existing *policy.Existing
	state    policy.State
	kind     policy.Kind
	gate     policy.Gate
	at       time.Time
}

// create runs begin.lua or enqueue.lua (op). extra are the script's
// op-specific ARGV between the caps and the stale id. When the reservation
// points at a callout whose record is gone (both carry the same TTL, but
// expiry is not simultaneous), it retries once treating it as free.
func (s *Store) create(ctx context.Context, op string, nc policy.NewCallout, lim policy.BacklogLimits, now time.Time, extra []any) (createReply, string, error) {
	id, err := s.newID(nc.Endpoint)
	if err != nil {
		return createReply{}, "", err
	}
	fp := policy.Fingerprint(nc.Method, nc.Path, nc.Query, nc.Body)
	fields := requestFields(id, nc, fp, now)
	k := keysOf(nc.Endpoint)
	parts := k.parts(id)
	keys := []string{parts[0], parts[1], k.due, k.lease, k.ep}
	if ik := k.idem(nc.Issuer, nc.IdempotencyKey); ik != "" {
		keys = append(keys, ik)
	}
	sc := s.lua.begin
	if op == "enqueue" {
		sc = s.lua.enqueue
	}
	stale := ""
	for range 2 {
		args := append([]any{msArg(now), id, fp, nc.Body,
			strconv.FormatInt(lim.MaxItems, 10), strconv.FormatInt(lim.MaxBytes, 10),
			strconv.FormatInt(lim.MaxItemsPerIssuer, 10), strconv.FormatInt(lim.MaxBytesPerIssuer, 10),
			issuerTag(nc.Issuer)}, extra...)
		args = append(append(args, stale), fields...)
		v, err := s.run(ctx, op, sc, keys, args...)
		if err != nil {
			return createReply{}, "", err
		}
		rep, holder, err := s.decodeCreate(ctx, op, v, fp, now)
		if err != nil || holder == "" {
			if err == nil && rep.existing == nil {
				s.remember(ctx, nc.Endpoint)
			}
			return rep, id, err
		}
		stale = holder
	}
	return createReply{}, "", fmt.Errorf("redisstore: %s: reservation points at a vanished callout twice", op)
}

// decodeCreate decodes a begin/enqueue reply. holder is set (and the reply
// empty) when the reservation's holder has no record any more.
func (s *Store) decodeCreate(ctx context.Context, op string, v any, fp string, now time.Time) (rep createReply, holder string, err error) {
	a := replyArr(v)
	if len(a) == 0 {
		return rep, "", fmt.Errorf("redisstore: %s: empty reply", op)
	}
	switch replyStr(a[0]) {
	case "disabled":
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, policy.ErrDisabled)
	case "backlog_full":
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, policy.ErrBacklogFull)
	case "issuer_backlog_full":
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, policy.ErrIssuerBacklogFull)
	case "exists":
		ex, err := s.existing(ctx, replyStr(a[1]), replyStr(a[2]) == fp, now)
		if err != nil || ex == nil {
			return rep, replyStr(a[1]), err
		}
		return createReply{existing: ex}, "", nil
	case "created":
		rep.state = policy.State(replyStr(a[1]))
		rep.at = fromMs(replyStr(a[3]))
		if rep.state == policy.InFlight {
			rep.kind = policy.Kind(replyStr(a[2]))
			rep.gate = policy.Gate{State: policy.GateOpen}
			if rep.kind == policy.KindProbe {
				rep.gate = policy.Gate{State: policy.GateHalfOpen}
			}
		} else {
			rep.gate = policy.Gate{State: policy.GateState(replyStr(a[2]))}
			if rep.gate.Shut() {
				rep.gate.Until = rep.at
			}
		}
		return rep, "", nil
	}
	return rep, "", fmt.Errorf("redisstore: %s: unexpected reply %v", op, a)
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
