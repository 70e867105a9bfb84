package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// NewCallout is a request to record: what Begin and Enqueue store.
type NewCallout struct {
	// Endpoint is the endpoint name (^[a-z0-9][a-z0-9-]{0,62}$, SPEC §10).
	Endpoint string
	// Issuer is the caller's JWT issuer: with Endpoint and IdempotencyKey
	// the scope of the reservation (SPEC §5).
	Issuer string
	Method string
	// Path is the path below the endpoint's base URL, with a leading "/".
	Path string
	// Query is the raw query string without "?".
	Query string
	// Header is the caller's header as received, already without
	// Authorization, Cookie, Proxy-Authorization and hop-by-hop headers.
	Header http.Header
	// Body is the request body; it counts toward Limits.MaxBytes.
	Body []byte
	// IdempotencyKey, when set, is reserved atomically with the creation.
	IdempotencyKey string
	// SourceRecord is the Callout-Source-Record header (a Salesforce id).
	SourceRecord string
	// ReplayOf (Enqueue only) is the dead letter this new chain replays
	// (SPEC §8); the chain takes over that dead letter's reservation.
	ReplayOf string
}

// Existing is the callout already holding an idempotency reservation.
type Existing struct {
	// ID is the holder's callout id.
	ID string
	// SameRequest reports whether the holder's fingerprint equals the new
	// request's (SPEC §5: else 422).
	SameRequest bool
	// Callout is the holder's record as read just after the reservation
	// check (a second round trip, only on this path).
	Callout *Callout
	// LeaseExpired is true when the holder is in_flight but its lease has
	// expired (its worker is presumably gone; the reaper will requeue it).
	LeaseExpired bool
}

// BeginOptions are the per-endpoint settings Begin needs.
type BeginOptions struct {
	// Lease is how long the first attempt is leased to the caller: at least
	// the attempt limit plus a grace period (SPEC §3). Required (> 0).
	Lease time.Duration
	// Breaker supplies ProbeLease for a request that becomes the probe.
	Breaker Breaker
	// Limits is the endpoint's backlog cap.
	Limits Limits
}

// BeginResult is what Begin did; exactly one of its fields is set.
type BeginResult struct {
	// Claimed: the callout was created in_flight and its first attempt
	// (Kind first, or probe when the breaker was half-open and this request
	// took the probe token) is leased to the caller, who must Complete it.
	Claimed *Claimed
	// Held: the callout was created held (breaker open, probe out or
	// endpoint paused); no attempt is consumed (SPEC §4 "breaker open").
	Held *HeldCallout
	// Existing: the idempotency key is already reserved; nothing created.
	Existing *Existing
}

// HeldCallout is a callout created in state held.
type HeldCallout struct {
	ID string
	// Gate is why it is held and until when.
	Gate Gate
	// DueAt is when it becomes due (the gate's reopening time).
	DueAt time.Time
}

// Begin creates a callout for the synchronous ingress (SPEC §4) and, in the
// same script, reserves its idempotency key (SPEC §5) and checks the gate
// and the backlog cap. One round trip; two when the key is already
// reserved. Errors: ErrDisabled, ErrBacklogFull, ErrUnavailable.
func (s *Store) Begin(ctx context.Context, nc NewCallout, opts BeginOptions) (BeginResult, error) {
	if opts.Lease <= 0 {
		return BeginResult{}, fmt.Errorf("redisstore: begin: lease must be > 0")
	}
	br := opts.Breaker.withDefaults(opts.Lease)
	token, err := s.token()
	if err != nil {
		return BeginResult{}, err
	}
	now := s.now()
	extra := []any{msArg(now.Add(opts.Lease)), msArg(now.Add(br.ProbeLease)), token}
	rep, id, err := s.create(ctx, "begin", nc, opts.Limits, now, extra)
	if err != nil || rep.existing != nil {
		return BeginResult{Existing: rep.existing}, err
	}
	if rep.state == Held {
		return BeginResult{Held: &HeldCallout{ID: id, Gate: rep.gate, DueAt: rep.at}}, nil
	}
	c := &Claimed{
		ID: id, Endpoint: nc.Endpoint, Issuer: nc.Issuer, Method: nc.Method, Path: nc.Path,
		Query: nc.Query, Header: nc.Header, Body: nc.Body, IdempotencyKey: nc.IdempotencyKey,
		SourceRecord: nc.SourceRecord, Attempt: 1, Kind: rep.kind, LeaseToken: token,
		LeaseExpiresAt: rep.at, StartedAt: msTime(now), FirstAttemptAt: msTime(now),
		CreatedAt: msTime(now), DueAt: msTime(now),
	}
	return BeginResult{Claimed: c}, nil
}

// EnqueueOptions are the settings Enqueue needs.
type EnqueueOptions struct {
	// DueAt is when the first attempt is due; zero: now (respond-async).
	DueAt time.Time
	// Limits is the endpoint's backlog cap.
	Limits Limits
}

// EnqueueResult is what Enqueue did.
type EnqueueResult struct {
	// ID is the new callout's id ("" when Existing is set).
	ID string
	// State is Scheduled, or Held when the gate is shut.
	State State
	// Gate is the gate the script saw.
	Gate Gate
	// DueAt is when the callout becomes due; a held callout is due when
	// its gate reopens, at the earliest.
	DueAt time.Time
	// Existing: the idempotency key is already reserved; nothing created.
	Existing *Existing
}

// Enqueue creates a callout whose first attempt the dispatcher makes
// (Prefer: respond-async, SPEC §4; a replay chain, SPEC §8), scheduled at
// opts.DueAt or held when the gate is shut. Same reservation, gate and cap
// checks as Begin. Errors: ErrDisabled, ErrBacklogFull, ErrUnavailable.
func (s *Store) Enqueue(ctx context.Context, nc NewCallout, opts EnqueueOptions) (EnqueueResult, error) {
	now := s.now()
	due := opts.DueAt
	if due.IsZero() || due.Before(now) {
		due = now
	}
	rep, id, err := s.create(ctx, "enqueue", nc, opts.Limits, now, []any{msArg(due), nc.ReplayOf})
	if err != nil || rep.existing != nil {
		return EnqueueResult{Existing: rep.existing}, err
	}
	return EnqueueResult{ID: id, State: rep.state, Gate: rep.gate, DueAt: rep.at}, nil
}

// createReply is a decoded begin/enqueue reply.
type createReply struct {
	existing *Existing
	state    State
	kind     Kind
	gate     Gate
	at       time.Time
}

// create runs begin.lua or enqueue.lua (op). extra are the script's
// op-specific ARGV between the caps and the stale id. When the reservation
// points at a callout whose record is gone (both carry the same TTL, but
// expiry is not simultaneous), it retries once treating it as free.
func (s *Store) create(ctx context.Context, op string, nc NewCallout, lim Limits, now time.Time, extra []any) (createReply, string, error) {
	id, err := s.newID(nc.Endpoint)
	if err != nil {
		return createReply{}, "", err
	}
	fp := Fingerprint(nc.Method, nc.Path, nc.Query, nc.Body)
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
			strconv.FormatInt(lim.MaxItems, 10), strconv.FormatInt(lim.MaxBytes, 10)}, extra...)
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
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, ErrDisabled)
	case "backlog_full":
		return rep, "", fmt.Errorf("redisstore: %s: %w", op, ErrBacklogFull)
	case "exists":
		ex, err := s.existing(ctx, replyStr(a[1]), replyStr(a[2]) == fp, now)
		if err != nil || ex == nil {
			return rep, replyStr(a[1]), err
		}
		return createReply{existing: ex}, "", nil
	case "created":
		rep.state = State(replyStr(a[1]))
		rep.at = fromMs(replyStr(a[3]))
		if rep.state == InFlight {
			rep.kind = Kind(replyStr(a[2]))
			rep.gate = Gate{State: GateOpen}
			if rep.kind == KindProbe {
				rep.gate = Gate{State: GateHalfOpen}
			}
		} else {
			rep.gate = Gate{State: GateState(replyStr(a[2]))}
			if rep.gate.Shut() {
				rep.gate.Until = rep.at
			}
		}
		return rep, "", nil
	}
	return rep, "", fmt.Errorf("redisstore: %s: unexpected reply %v", op, a)
}

// existing reads the callout holding a reservation; nil when it is gone.
func (s *Store) existing(ctx context.Context, id string, same bool, now time.Time) (*Existing, error) {
	c, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ex := &Existing{ID: id, SameRequest: same, Callout: c}
	ex.LeaseExpired = c.State == InFlight && !c.LeaseExpiresAt.After(now)
	return ex, nil
}

// msTime truncates t to the millisecond, as stored.
func msTime(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
