package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Complete applies c to the claimed attempt in one script (complete.lua):
// fencing on the lease token, attempt log, last response, breaker, pause, then the
// action; finishing sets the TTLs of the record and its reservation. With
// Options.Outbox, the same script queues the Salesforce writes the ending
// causes (outbox.go): the dead letter's mirror, expiry check and owner
// notification, and the completion event of a scheduled callout. It updates
// cl in place after an accepted ActionRetryInline (Attempt, Kind,
// StartedAt, LeaseExpiresAt). One round trip (a queue of a sharded
// endpoint pipelines the breaker update on the endpoint hash with it, and
// a dead letter there notifies the owner in a second). Complete is a
// complete.lua call of one completion; Completer batches the completions
// of concurrent callers into one pipeline, those of one queue into one
// call of the same script. Errors: ErrStaleLease when the lease is no
// longer cl's (nothing changed), ErrUnavailable; a Redis error the
// script raised (partial writes of this completion may stay: Redis does
// not roll a script back).
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
	// its part of a complete.lua call (planCompletions): its five keys and
	// 24 arguments
	keys    []string
	args    []any
	breaker *scriptCall // outcome.lua on the endpoint hash: sharded queues only
	// notify.lua on the endpoint hash, right after breaker in the pipeline:
	// a dead letter of a sharded queue (the owner is told once per outage)
	notify *scriptCall
	// after the write: its own complete.lua reply, or error,
	// and its breaker and notify calls'
	reply, breakerReply, notifyReply any
	err, breakerErr, notifyErr       error
}

// prepareComplete validates c and builds the script calls of its
// completion.
func (s *Store) prepareComplete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (*completion, error) {
	now := s.now()
	br := c.Breaker.WithDefaults(c.Lease)
	p := &completion{cl: cl, c: c, now: now}
	q, ok := queueOfID(cl.Endpoint, cl.ID)
	if !ok {
		return nil, fmt.Errorf("redisstore: complete %q: malformed id", cl.ID)
	}
	p.q = q
	args, err := s.completeArgs(cl, c, br, now)
	if err != nil {
		return nil, err
	}
	view, given, err := s.gateOf(ctx, q)
	if err != nil {
		return nil, err
	}
	gs, gu := gateArgs(view, given)
	args = append(args, gs, gu, cl.Endpoint, s.canNotify(cl.Endpoint))
	rc, rest, resp := q.record(cl.ID)
	res := q.reservation(cl.Issuer, cl.IdempotencyKey)
	if res == "" {
		res = rc
	}
	replayed := rc
	if n, ok := ShardOfID(cl.ReplayOf); ok {
		if m, _ := ShardOfID(cl.ID); n == m {
			// The chain replays a dead letter whose record is in this slot
			// (the same key's queue): complete.lua notes the outcome there.
			replayed, _ = calloutKeyOfID(cl.ReplayOf)
		}
	}
	p.keys, p.args = []string{rc, rest, resp, res, replayed}, args
	if given {
		p.breaker = s.breakerCall(cl, c, br, now, view)
		if c.Action == policy.ActionDeadLetter {
			// In the pipeline, right after this attempt's breaker update: a
			// success later in the same pipeline may end the outage (notify.lua
			// then finds none), so it cannot wait for the pipeline's end.
			home := homeQueue(cl.Endpoint)
			p.notify = &scriptCall{sc: s.lua.notify, keys: []string{home.ep, home.sfo},
				args: []any{msArg(now), cl.Endpoint, cl.ID, flag(s.outbox), string(c.Reason), s.canNotify(cl.Endpoint)}}
		}
	}
	return p, nil
}

// breakerCall is the breaker and pause update of an attempt of a sharded
// queue, on the endpoint hash (outcome.lua, the rules of lib.lua
// breaker_apply), or nil when it has nothing to change: a success while
// this replica saw no failure and held no probe, or no dispatch at all.
func (s *Store) breakerCall(cl *policy.Claimed, c policy.Completion, br policy.BreakerSettings, now time.Time, view gateView) *scriptCall {
	probe := ""
	if cl.Kind == policy.KindProbe {
		probe = cl.LeaseToken
	}
	success := c.Attempt != nil && c.Attempt.Outcome == policy.Success
	paused := "0"
	if c.PausedUntil.After(now) {
		paused = msArg(c.PausedUntil)
	}
	if probe == "" && paused == "0" && (c.Attempt == nil || (success && view.failures == 0)) {
		return nil
	}
	dispatched := c.Attempt != nil
	return &scriptCall{sc: s.lua.outcome, keys: []string{endpointKey(cl.Endpoint)}, args: []any{
		msArg(now), probe, flag(success), flag(dispatched && c.CountsTowardBreaker), strconv.Itoa(br.Failures),
		msArg(now.Add(br.ProbeInterval)), paused}}
}

// finishComplete decodes a completion after its pipeline ran.
func (s *Store) finishComplete(ctx context.Context, p *completion) (policy.CompleteResult, error) {
	if p.err != nil {
		return policy.CompleteResult{}, p.err
	}
	a, err := replyN("complete", p.reply, 1)
	if err != nil {
		return policy.CompleteResult{}, err
	}
	if replyStr(a[0]) == "stale" {
		return policy.CompleteResult{}, fmt.Errorf("redisstore: complete %s: %w", p.cl.ID, policy.ErrStaleLease)
	}
	if len(a) < 15 {
		return policy.CompleteResult{}, fmt.Errorf("redisstore: complete: unexpected reply %v", a)
	}
	res := policy.CompleteResult{
		State: policy.State(replyStr(a[0])), NotifyOwner: replyInt(a[5]) == 1,
		Attempts: int(replyInt(a[9])), Reason: policy.DeadLetterReason(replyStr(a[10])),
		Breaker: decodeBreakerChange(a[1:5], a[6], a[7], a[8]),
		Gate:    policy.GateState(replyStr(a[11])), LastStatus: int(replyInt(a[12])), LastError: replyStr(a[13]),
	}
	res.Breaker.Held, res.Breaker.HeldBy = int(replyInt(a[14])), res.Gate
	if p.breaker != nil {
		if p.breakerErr != nil {
			return res, p.breakerErr
		}
		b, err := replyN("complete: breaker", p.breakerReply, 7)
		if err != nil {
			return res, err
		}
		res.Breaker = decodeBreakerChange(b[0:4], b[4], b[5], b[6])
		s.forgetGate(p.cl.Endpoint)
	}
	if p.notify != nil && res.State == policy.DeadLettered {
		if p.notifyErr != nil {
			return res, p.notifyErr
		}
		res.NotifyOwner = replyInt(p.notifyReply) == 1
	}
	if res.Breaker.Opened || res.Breaker.Closed {
		s.forgetGate(p.cl.Endpoint)
	}
	s.gateChanged(p.cl.Endpoint, res.Breaker, p.c.PausedUntil.After(p.now))
	if p.c.Action == policy.ActionRetryInline && res.State == policy.InFlight {
		p.cl.Attempt, p.cl.Kind = res.Attempts, policy.KindRetry
		p.cl.StartedAt, p.cl.LeaseExpiresAt = msTime(p.now), msTime(p.now.Add(p.c.Lease))
	}
	return res, nil
}

// completeArgs builds complete.lua's ARGV 1–20.
func (s *Store) completeArgs(cl *policy.Claimed, c policy.Completion, br policy.BreakerSettings, now time.Time) ([]any, error) {
	switch c.Action {
	case policy.ActionSucceed, policy.ActionFail, policy.ActionRetry, policy.ActionDeadLetter:
	case policy.ActionRetryInline:
		if c.Lease <= 0 {
			return nil, fmt.Errorf("redisstore: complete %s: inline retry needs a lease", cl.ID)
		}
	default:
		return nil, fmt.Errorf("redisstore: complete %s: unknown action %q", cl.ID, c.Action)
	}
	if c.Action == policy.ActionDeadLetter && c.Reason == "" {
		return nil, fmt.Errorf("redisstore: complete %s: dead letter without a reason", cl.ID)
	}
	attempt, success := "", false
	if c.Attempt != nil {
		a := *c.Attempt
		a.N, a.Kind = cl.Attempt, cl.Kind
		attempt = encodeAttempt(a)
		success = a.Outcome == policy.Success
	}
	next := c.NextAttemptAt
	if next.Before(now) {
		next = now
	}
	paused := "0"
	if c.PausedUntil.After(now) {
		paused = msArg(c.PausedUntil)
	}
	resp, err := s.responseArgs(c.Response)
	if err != nil {
		return nil, fmt.Errorf("redisstore: complete %s: %w", cl.ID, err)
	}
	args := []any{msArg(now), cl.ID, cl.LeaseToken, string(c.Action), attempt,
		flag(success), flag(c.CountsTowardBreaker), strconv.Itoa(br.Failures),
		msArg(now.Add(br.ProbeInterval)), msArg(next), string(c.Reason),
		durMs(s.idemTTL), durMs(s.dlTTL), msArg(now.Add(-s.dlTTL)), paused,
		msArg(now.Add(c.Lease))}
	return append(append(args, resp...), c.Error, flag(s.outbox)), nil
}

// responseArgs returns ARGV 17–18: the status and the encoded response
// with its body cut to the cap on a UTF-8 character boundary (contract §5).
func (s *Store) responseArgs(r *policy.Response) ([]any, error) {
	if r == nil {
		return []any{"", ""}, nil
	}
	body, cut := r.Body, r.Truncated
	if int64(len(body)) > max(s.bodyCap, 0) {
		body, cut = cutBody(body, max(s.bodyCap, 0)), true
	}
	enc, err := encodeResponse(r, body, cut)
	if err != nil {
		return nil, err
	}
	return []any{strconv.Itoa(r.Status), enc}, nil
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

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
