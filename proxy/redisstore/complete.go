package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Action is what a completion does with the callout. The policy (attempts,
// max_age, outcome class, idempotency: ignored) decides; the store applies.
type Action string

// The completion actions.
const (
	// ActionSucceed: 2xx; the callout ends succeeded.
	ActionSucceed Action = "succeeded"
	// ActionFail: a synchronous permanent answer returned to the caller;
	// the callout ends failed (recorded for idempotent replay, SPEC §7).
	ActionFail Action = "failed"
	// ActionRetry: reschedule at Completion.NextAttemptAt (held instead when
	// the gate is now shut; dead-lettered endpoint_disabled when the
	// endpoint is disabled).
	ActionRetry Action = "retry"
	// ActionRetryInline (Prefer: wait=N, SPEC §4): keep the lease and make
	// the next attempt now; the attempt is counted and the lease renewed
	// to now+Completion.Lease. When the gate is no longer open the store
	// refuses and reschedules at Completion.NextAttemptAt instead (the
	// result's State says which).
	ActionRetryInline Action = "again"
	// ActionDeadLetter: end as a dead letter with Completion.Reason.
	ActionDeadLetter Action = "dead"
)

// Completion is the result of one leased attempt, applied atomically by
// Complete.
type Completion struct {
	// Action is what to do with the callout.
	Action Action
	// Attempt is the attempt just made (its N and Kind are taken from the
	// claim). Nil when the claimed callout was never dispatched (e.g. found
	// exhausted before sending): its attempt count is then undone and the
	// breaker untouched.
	Attempt *Attempt
	// Response is the upstream's response to the attempt, nil when there
	// was none; its body is cut to Options.ResponseBodyCap.
	Response *Response
	// Error is the attempt's error text (no secrets); "" when none.
	Error string
	// CountsTowardBreaker: a retryable failure that counts toward the
	// breaker (SPEC §6: 429 and permanent answers never count).
	CountsTowardBreaker bool
	// NextAttemptAt is when a retry is due (ActionRetry, and
	// ActionRetryInline when refused).
	NextAttemptAt time.Time
	// Reason is the dead-letter reason (ActionDeadLetter).
	Reason DeadLetterReason
	// PausedUntil, when set, pauses the whole endpoint until then (429 with
	// Retry-After, capped by the caller at retry_after_cap, SPEC §3). An
	// existing longer pause is kept.
	PausedUntil time.Time
	// Lease is the renewed lease for ActionRetryInline.
	Lease time.Duration
	// Breaker is the endpoint's breaker settings (threshold, interval).
	Breaker Breaker
}

// CompleteResult is what a completion changed.
type CompleteResult struct {
	// State is the callout's new state: succeeded, failed, scheduled, held,
	// dead_lettered, or in_flight after an accepted ActionRetryInline.
	State State
	// Attempts is the callout's attempt count afterwards.
	Attempts int
	// NotifyOwner: this is the first dead letter of the current outage; the
	// owner must be told (exactly one completion per outage gets it, SPEC §6).
	NotifyOwner bool
	// Breaker is what the completion did to the endpoint's breaker.
	Breaker BreakerChange
}

// Complete applies c to the claimed attempt in one script (complete.lua):
// fencing on the lease token, attempt log, last response, breaker, pause,
// then the action; finishing sets the TTLs of the record and its
// reservation. With Options.Outbox, the same script queues the Salesforce
// writes the ending causes (outbox.go): the dead letter's mirror, expiry
// check and owner notification, and the completion event of a scheduled
// callout. It updates cl in place after an accepted ActionRetryInline
// (Attempt, Kind, StartedAt, LeaseExpiresAt). Errors: ErrStaleLease when the
// lease is no longer cl's (nothing changed), ErrUnavailable.
func (s *Store) Complete(ctx context.Context, cl *Claimed, c Completion) (CompleteResult, error) {
	now := s.now()
	br := c.Breaker.withDefaults(c.Lease)
	args, err := s.completeArgs(cl, c, br, now)
	if err != nil {
		return CompleteResult{}, err
	}
	k := keysOf(cl.Endpoint)
	sfo, sfx := k.outbox()
	keys := append(k.parts(cl.ID), k.due, k.lease, k.ep, k.dl, sfo, sfx)
	if ik := k.idem(cl.Issuer, cl.IdempotencyKey); ik != "" {
		keys = append(keys, ik)
	}
	v, err := s.run(ctx, "complete", s.lua.complete, keys, args...)
	if err != nil {
		return CompleteResult{}, err
	}
	a, err := replyN("complete", v, 1)
	if err != nil {
		return CompleteResult{}, err
	}
	if replyStr(a[0]) == "stale" {
		return CompleteResult{}, fmt.Errorf("redisstore: complete %s: %w", cl.ID, ErrStaleLease)
	}
	if len(a) < 10 {
		return CompleteResult{}, fmt.Errorf("redisstore: complete: unexpected reply %v", a)
	}
	res := CompleteResult{
		State: State(replyStr(a[0])), NotifyOwner: replyInt(a[5]) == 1,
		Attempts: int(replyInt(a[9])), Breaker: decodeBreakerChange(a[1:5], a[6], a[7], a[8]),
	}
	if c.Action == ActionRetryInline && res.State == InFlight {
		cl.Attempt, cl.Kind = res.Attempts, KindRetry
		cl.StartedAt, cl.LeaseExpiresAt = msTime(now), msTime(now.Add(c.Lease))
	}
	return res, nil
}

// completeArgs builds complete.lua's ARGV.
func (s *Store) completeArgs(cl *Claimed, c Completion, br Breaker, now time.Time) ([]any, error) {
	switch c.Action {
	case ActionSucceed, ActionFail, ActionRetry, ActionDeadLetter:
	case ActionRetryInline:
		if c.Lease <= 0 {
			return nil, fmt.Errorf("redisstore: complete %s: inline retry needs a lease", cl.ID)
		}
	default:
		return nil, fmt.Errorf("redisstore: complete %s: unknown action %q", cl.ID, c.Action)
	}
	if c.Action == ActionDeadLetter && c.Reason == "" {
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
// with its body cut to the cap.
func (s *Store) responseArgs(r *Response) ([]any, error) {
	if r == nil {
		return []any{"", ""}, nil
	}
	body, cut := r.Body, r.Truncated
	limit := max(s.bodyCap, 0)
	if int64(len(body)) > limit {
		body, cut = body[:limit], true
	}
	enc, err := encodeResponse(r, body, cut)
	if err != nil {
		return nil, err
	}
	return []any{strconv.Itoa(r.Status), enc}, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
