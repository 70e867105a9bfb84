package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
)

// Complete applies c to the claimed attempt in one complete.lua call of
// one completion (Completer batches those of concurrent callers): fencing on
// the lease token, attempt log, last response, breaker, pause, then the
// action; finishing sets the TTLs of the record and its reservation. With
// Options.Outbox, the same script queues the Salesforce writes the ending
// causes (proxy/redisstore/outbox). It updates cl in place after an
// accepted ActionRetryInline (Attempt, Kind, StartedAt, LeaseExpiresAt).
// One round trip (a sharded endpoint's queue pipelines its breaker update,
// outcome.lua, and a dead letter there notifies the owner in a second).
// Errors: ErrStaleLease when the lease is no longer cl's (nothing
// changed), ErrUnavailable; a Redis error the script raised (this
// completion's partial writes may stay: Redis never rolls a script back).
func (s *Store) Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error) {
	p, err := s.prepareComplete(ctx, cl, c)
	if err != nil {
		return policy.CompleteResult{}, err
	}
	s.writeCompletions(ctx, []*completion{p})
	return s.finishComplete(ctx, p)
}

// completion is one prepared Complete: its script calls, queued in a
// pipeline (possibly with other callers'), then decoded.
type completion struct {
	cl  *policy.Claimed
	c   policy.Completion
	now time.Time
	q   queue
	// its part of a complete.lua call (planCompletions)
	item    completeItem
	breaker *outcomeArgs // outcome.lua on the endpoint hash: sharded queues only
	// notify.lua on the endpoint hash, right after breaker in the pipeline:
	// a dead letter of a sharded queue (the owner is told once per outage)
	notify *notifyArgs
	// next: the claim its call makes after the completions
	// (CompleteAndClaim; nil: none)
	next *nextClaim
	// after the write: its own complete.lua reply, or error,
	// and its breaker and notify calls'
	reply                      completeOne
	breakerReply               outcomeReply
	notifyReply                toldReply
	err, breakerErr, notifyErr error
}

// prepareComplete validates c and builds the script calls of its
// completion.
func (s *Store) prepareComplete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (*completion, error) {
	now := s.now()
	br := c.Breaker.WithDefaults(c.Lease)
	p := &completion{cl: cl, c: c, now: now}
	q, ok := s.calloutQueue(cl.Endpoint, cl.Issuer, cl.ID)
	if !ok {
		return nil, fmt.Errorf("redisstore: complete %q: malformed id", cl.ID)
	}
	p.q = q
	item, err := s.completeItemOf(cl, c, br, now)
	if err != nil {
		return nil, err
	}
	view, given, err := s.gateOf(ctx, q)
	if err != nil {
		return nil, err
	}
	item.Gate, item.GateUntil = view.Args(given)
	item.Endpoint, item.Notify, item.Part = cl.Endpoint, s.canNotify(cl.Endpoint), q.Part
	item.Quorum = s.quorum(cl.Endpoint)
	rc, rest, resp := q.Record(cl.ID)
	res := reservationKey(q, rc, cl.Issuer, cl.IdempotencyKey)
	replayed := rc
	if n, ok := keyspace.ShardOfID(cl.ReplayOf); ok {
		if m, _ := keyspace.ShardOfID(cl.ID); n == m {
			// The chain replays a dead letter whose record is in this slot
			// (the same key's queue): complete.lua notes the outcome there.
			replayed, _ = keyspace.Callout(cl.ReplayOf)
		}
	}
	item.Record, item.Rest, item.Resp, item.Reservation, item.Replayed = rc, rest, resp, res, replayed
	p.item = item
	if given {
		p.breaker = s.breakerCall(cl, c, br, now, view)
		if c.Action == policy.ActionDeadLetter {
			// In the pipeline, right after this attempt's breaker update: a
			// success later in the same pipeline may end the outage (notify.lua
			// then finds none), so it cannot wait for the pipeline's end.
			home := keyspace.HomeQueue(cl.Endpoint)
			p.notify = &notifyArgs{Endpoint: home.EndpointHash, SFO: home.SFO, Now: s.clockArg(now), Name: cl.Endpoint,
				ID: cl.ID, Outbox: s.outbox, Reason: string(c.Reason), Can: s.canNotify(cl.Endpoint)}
		}
	}
	return p, nil
}

// breakerCall is the breaker and pause update of an attempt of a sharded
// queue, on the endpoint hash (outcome.lua, the rules of lib.lua
// breaker_apply), or nil when it has nothing to change: a success while
// this replica saw no failure, held no probe and saw the last success
// within half a probe interval (so that lsu stays fresh for the veto of
// contract §6: two failing organisations never open the endpoint's
// breaker over a third that succeeds), or no dispatch at all.
func (s *Store) breakerCall(cl *policy.Claimed, c policy.Completion, br policy.BreakerSettings, now time.Time, view gateview.View) *outcomeArgs {
	probe := ""
	if cl.Kind == policy.KindProbe {
		probe = cl.LeaseToken
	}
	success := c.Attempt != nil && c.Attempt.Outcome == policy.Success
	pause := msUntil(c.PausedUntil, now)
	fresh := now.Sub(view.LastSuccess) < br.ProbeInterval/2
	if probe == "" && pause == 0 && (c.Attempt == nil || (success && view.Failures == 0 && fresh)) {
		return nil
	}
	dispatched := c.Attempt != nil
	return &outcomeArgs{Endpoint: keyspace.Endpoint(cl.Endpoint), Now: s.clockArg(now), Probe: probe, Success: success,
		Counts: dispatched && c.CountsTowardBreaker, Threshold: br.Failures,
		ProbeIn: br.ProbeInterval.Milliseconds(), Pause: pause,
		Part: s.partition(cl.Endpoint, keyspace.IssuerTag(cl.Issuer)), Quorum: s.quorum(cl.Endpoint)}
}

// finishComplete decodes a completion after its pipeline ran.
func (s *Store) finishComplete(ctx context.Context, p *completion) (policy.CompleteResult, error) {
	if p.err != nil {
		if !errors.Is(p.err, policy.ErrUnavailable) {
			// The script raised an error after some of its writes (Redis
			// never rolls a script back): if they closed a breaker, what it
			// held waits no more (hold/lua/park.lua checks the gate).
			if _, err := s.held.Release(ctx, p.cl.Endpoint); err != nil {
				s.log.Warn("redisstore: held callouts not re-checked after a failed completion", "endpoint", p.cl.Endpoint, "err", err)
			}
		}
		return policy.CompleteResult{}, p.err
	}
	a := p.reply
	if a.State == "stale" {
		return policy.CompleteResult{}, fmt.Errorf("redisstore: complete %s: %w", p.cl.ID, policy.ErrStaleLease)
	}
	if a.State == "" {
		return policy.CompleteResult{}, fmt.Errorf("redisstore: complete %s: reply without a state: %+v", p.cl.ID, a)
	}
	res := policy.CompleteResult{
		State: policy.State(a.State), NotifyOwner: a.Notify, Attempts: a.Attempts,
		Reason: policy.DeadLetterReason(a.Reason), Gate: policy.GateState(a.Gate),
		LastStatus: a.LastStatus, LastError: a.LastError,
		Breaker: policy.BreakerChange{Opened: a.Opened, Closed: a.Closed, OutageBegan: a.Began,
			OutageEnded: a.Ended, Probe: a.Probe, ConsecutiveFailures: a.Failures,
			OutageStartedAt: msTimeOf(a.OutageAt), Held: a.Held},
	}
	res.Breaker.HeldBy = res.Gate
	if p.breaker != nil {
		if p.breakerErr != nil {
			return res, p.breakerErr
		}
		res.Breaker = p.breakerReply.change()
		res.Breaker.Held, res.Breaker.HeldBy = 0, ""
		s.gates.Forget(p.cl.Endpoint)
	}
	if p.q.Part != "" {
		res.Breaker.Partition = p.cl.Issuer
	}
	if p.notify != nil && res.State == policy.DeadLettered {
		if p.notifyErr != nil {
			return res, p.notifyErr
		}
		res.NotifyOwner = p.notifyReply.Told == 1
	}
	if res.Breaker.Opened || res.Breaker.Closed {
		s.gates.Forget(p.cl.Endpoint)
	}
	shut := shutGate{a.Shut, a.GateUntil, a.Level}
	if b := p.breakerReply; p.breaker != nil {
		shut = shutGate{b.Shut, b.GateUntil, b.Level}
	}
	s.gateChanged(ctx, p.cl.Endpoint, res.Breaker, p.c.PausedUntil.After(p.now), shut)
	if res.State.Finished() && p.cl.ReplayOf != "" && p.item.Replayed == p.item.Record {
		// The chain's dead letter is in another slot (a sharded endpoint's
		// keyless replay), which complete.lua cannot write: note the outcome
		// on its mark here (proxy/redisstore/deadletters; its MarkReplayed notes it when the
		// chain ended first).
		if err := s.dead.NoteReplayOutcome(ctx, p.cl.ReplayOf, p.cl.ID, res.State, ""); err != nil {
			s.log.Warn("noting a replay chain's outcome on its dead letter failed; its mark stays pending",
				slog.String("dead_letter", p.cl.ReplayOf), slog.String("chain", p.cl.ID), slog.Any("error", err))
		}
	}
	if p.c.Action == policy.ActionRetryInline && res.State == policy.InFlight {
		p.cl.Attempt, p.cl.Kind = res.Attempts, policy.KindRetry
		p.cl.StartedAt, p.cl.LeaseExpiresAt = msTime(p.now), msTime(p.now.Add(p.c.Lease))
	}
	return res, nil
}

// completeArgs are complete.lua's keys and arguments: the queue's keys
// (counters: the endpoint hash or the queue's counter hash; dl and dlb the
// dead-letter index and its bytes; sfo and sfx the Salesforce outbox and
// its expiry schedule, package outbox), then its completions.
type completeArgs struct {
	Due      string         `lua:"due,key"`
	Lease    string         `lua:"lease,key"`
	Counters string         `lua:"counters,key"`
	DL       string         `lua:"dl,key"`
	DLB      string         `lua:"dlb,key"`
	SFO      string         `lua:"sfo,key"`
	SFX      string         `lua:"sfx,key"`
	Items    []completeItem `lua:"items"`
	// The claim after the completions (lua/complete.lua): up to ClaimWant
	// (0: none) due callouts of the queue, leased for ClaimLease ms from
	// ClaimNow (lib.lua clock), record keys ClaimPrefix+id, lease tokens
	// ClaimToken+".i", behind ClaimGate/ClaimGateUntil ("": the counters
	// hash's) of partition ClaimPart.
	ClaimWant      int    `lua:"claim_want"`
	ClaimNow       int64  `lua:"claim_now"`
	ClaimLease     int64  `lua:"claim_lease"`
	ClaimPrefix    string `lua:"claim_prefix"`
	ClaimToken     string `lua:"claim_token"`
	ClaimGate      string `lua:"claim_gate"`
	ClaimGateUntil string `lua:"claim_gate_until"`
	ClaimPart      string `lua:"claim_part"`
}

// completeItem is one completion of a complete.lua call. Durations are ms
// from Now (lib.lua clock). Keys: the record, its :q, :r, its reservation
// and the record its chain replays (the record key when it has none).
// Action is succeeded|failed|retry|again|dead; Attempt the encoded entry
// ("": never dispatched, the claim's count is undone); ProbeIn when the
// breaker (re)opens; DueIn for retry and a refused again; index entries
// older than DeadTTL are pruned on the way; Pause 0: none; Status "": no
// response; Gate "": read from counters; Notify: someone can be told of an
// outage (Options.Notify); Part the breaker partition of the callout's
// organisation ("" the endpoint's, contract §6); Quorum the open
// partitions that open the endpoint's own breaker (0: lib.lua's default).
type completeItem struct {
	Record      string `lua:"record,key"`
	Rest        string `lua:"rest,key"`
	Resp        string `lua:"resp,key"`
	Reservation string `lua:"reservation,key"`
	Replayed    string `lua:"replayed,key"`

	Now         int64  `lua:"now"`
	ID          string `lua:"id"`
	Token       string `lua:"token"`
	Action      string `lua:"action"`
	Attempt     string `lua:"attempt"`
	Success     bool   `lua:"success"`
	Counts      bool   `lua:"counts"`
	Threshold   int    `lua:"threshold"`
	ProbeIn     int64  `lua:"probe_in"`
	DueIn       int64  `lua:"due_in"`
	Reason      string `lua:"reason"`
	FinishedTTL int64  `lua:"finished_ttl"`
	DeadTTL     int64  `lua:"dead_ttl"`
	Pause       int64  `lua:"pause"`
	Lease       int64  `lua:"lease"`
	Status      string `lua:"status"`
	Response    string `lua:"response"`
	Error       string `lua:"error"`
	Outbox      bool   `lua:"outbox"`
	Gate        string `lua:"gate"`
	GateUntil   string `lua:"gate_until"`
	Endpoint    string `lua:"endpoint"`
	Notify      bool   `lua:"notify"`
	Part        string `lua:"part"`
	Quorum      int    `lua:"quorum"`
}

// completeReply is complete.lua's reply: one result per completion, in
// order.
type completeReply struct {
	Results []completeOne `lua:"results"`
	// the claim after the completions: what it leased, the gate it saw
	Claimed        []claimedOne `lua:"claimed"`
	ClaimGate      string       `lua:"claim_gate"`
	ClaimGateUntil int64        `lua:"claim_gate_until"`
}

// completeOne is one completion's result (lua/complete.lua).
type completeOne struct {
	Error      string `lua:"error"`
	State      string `lua:"state"`
	Opened     bool   `lua:"opened"`
	Closed     bool   `lua:"closed"`
	Began      bool   `lua:"began"`
	Ended      bool   `lua:"ended"`
	Notify     bool   `lua:"notify"`
	Failures   int    `lua:"failures"`
	OutageAt   int64  `lua:"outage_at"`
	Probe      bool   `lua:"probe"`
	Attempts   int    `lua:"attempts"`
	Reason     string `lua:"reason"`
	Gate       string `lua:"gate"`
	LastStatus int    `lua:"last_status"`
	LastError  string `lua:"last_error"`
	Held       int    `lua:"held"`
	// Shut: this result shut the gate, until GateUntil (Redis-clock ms),
	// the gate of Level (the breaker partition, "" the endpoint's):
	// package hold then holds the waiting callouts behind it
	Shut      bool   `lua:"shut"`
	GateUntil int64  `lua:"gate_until"`
	Level     string `lua:"level"`
}

// shutGate is what a result's reply (complete.lua, outcome.lua) says of
// a gate it shut (Shut, GateUntil, Level of completeOne and outcomeReply).
type shutGate struct {
	shut  bool
	until int64
	level string
}

// completeItemOf builds the arguments of c's completion of cl (its keys,
// gate, endpoint and notify flag are the caller's to add).
func (s *Store) completeItemOf(cl *policy.Claimed, c policy.Completion, br policy.BreakerSettings, now time.Time) (completeItem, error) {
	switch c.Action {
	case policy.ActionSucceed, policy.ActionFail, policy.ActionRetry, policy.ActionDeadLetter:
	case policy.ActionRetryInline:
		if c.Lease <= 0 {
			return completeItem{}, fmt.Errorf("redisstore: complete %s: inline retry needs a lease", cl.ID)
		}
	default:
		return completeItem{}, fmt.Errorf("redisstore: complete %s: unknown action %q", cl.ID, c.Action)
	}
	if c.Action == policy.ActionDeadLetter && c.Reason == "" {
		return completeItem{}, fmt.Errorf("redisstore: complete %s: dead letter without a reason", cl.ID)
	}
	it := completeItem{Now: s.clockArg(now), ID: cl.ID, Token: cl.LeaseToken, Action: string(c.Action),
		Counts: c.CountsTowardBreaker, Threshold: br.Failures, ProbeIn: br.ProbeInterval.Milliseconds(),
		Reason: string(c.Reason), FinishedTTL: s.idemTTL.Milliseconds(), DeadTTL: s.dlTTL.Milliseconds(),
		Pause: msUntil(c.PausedUntil, now), Lease: c.Lease.Milliseconds(), DueIn: msUntil(c.NextAttemptAt, now),
		Error: c.Error, Outbox: s.outbox}
	if c.Attempt != nil {
		a := *c.Attempt
		a.N, a.Kind = cl.Attempt, cl.Kind
		it.Attempt, it.Success = record.EncodeAttempt(a), a.Outcome == policy.Success
	}
	var err error
	if it.Status, it.Response, err = s.responseArgs(c.Response); err != nil {
		return completeItem{}, fmt.Errorf("redisstore: complete %s: %w", cl.ID, err)
	}
	return it, nil
}

// responseArgs returns the status and the encoded response with its body
// cut to the cap on a UTF-8 character boundary (contract §5); "", "" for
// no response.
func (s *Store) responseArgs(r *policy.Response) (status, enc string, err error) {
	if r == nil {
		return "", "", nil
	}
	body, cut := r.Body, r.Truncated
	if int64(len(body)) > max(s.bodyCap, 0) {
		body, cut = cutBody(body, max(s.bodyCap, 0)), true
	}
	b, err := record.EncodeResponse(r, body, cut)
	if err != nil {
		return "", "", err
	}
	return strconv.Itoa(r.Status), string(b), nil
}

// cutBody returns the first limit bytes of body (limit < len(body)), one to
// three bytes fewer when the cut would fall inside a UTF-8 sequence, so a
// long text answer stays valid UTF-8 — text, not base64, in status
// documents and dead letters (contract §5). A binary body loses at most those
// three bytes more than the cap.
func cutBody(body []byte, limit int64) []byte {
	n := int(limit)
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(body[i]) {
			return body[:i]
		}
	}
	return body[:n]
}
