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
// fencing on the lease token, attempt log, last response, breaker, pause,
// then the action; finishing sets the TTLs of the record and its
// reservation. With Options.Outbox, the same script queues the Salesforce
// writes the ending causes (outbox.go): the dead letter's mirror, expiry
// check and owner notification, and the completion event of a scheduled
// callout. It updates cl in place after an accepted ActionRetryInline
// (Attempt, Kind, StartedAt, LeaseExpiresAt). Errors: ErrStaleLease when the
// lease is no longer cl's (nothing changed), ErrUnavailable.
func (s *Store) Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error) {
	now := s.now()
	br := c.Breaker.WithDefaults(c.Lease)
	args, err := s.completeArgs(cl, c, br, now)
	if err != nil {
		return policy.CompleteResult{}, err
	}
	k := keysOf(cl.Endpoint)
	sfo, sfx := k.outbox()
	keys := append(k.parts(cl.ID), k.due, k.lease, k.ep, k.dl, sfo, sfx, k.dlb)
	if ik := k.idem(cl.Issuer, cl.IdempotencyKey); ik != "" {
		keys = append(keys, ik)
	}
	v, err := s.run(ctx, "complete", s.lua.complete, keys, args...)
	if err != nil {
		return policy.CompleteResult{}, err
	}
	a, err := replyN("complete", v, 1)
	if err != nil {
		return policy.CompleteResult{}, err
	}
	if replyStr(a[0]) == "stale" {
		return policy.CompleteResult{}, fmt.Errorf("redisstore: complete %s: %w", cl.ID, policy.ErrStaleLease)
	}
	if len(a) < 11 {
		return policy.CompleteResult{}, fmt.Errorf("redisstore: complete: unexpected reply %v", a)
	}
	res := policy.CompleteResult{
		State: policy.State(replyStr(a[0])), NotifyOwner: replyInt(a[5]) == 1,
		Attempts: int(replyInt(a[9])), Reason: policy.DeadLetterReason(replyStr(a[10])), Breaker: decodeBreakerChange(a[1:5], a[6], a[7], a[8]),
	}
	s.gateChanged(cl.Endpoint, res.Breaker, c.PausedUntil.After(now))
	if c.Action == policy.ActionRetryInline && res.State == policy.InFlight {
		cl.Attempt, cl.Kind = res.Attempts, policy.KindRetry
		cl.StartedAt, cl.LeaseExpiresAt = msTime(now), msTime(now.Add(c.Lease))
	}
	return res, nil
}

// completeArgs builds complete.lua's ARGV.
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
		var err error
		if attempt, err = encodeAttempt(a); err != nil {
			return nil, fmt.Errorf("redisstore: complete %s: %w", cl.ID, err)
		}
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
// with its body cut to the cap on a UTF-8 character boundary (SPEC §5).
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
// documents and dead letters (SPEC §5). A binary body loses at most those
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
