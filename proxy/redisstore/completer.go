package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
)

// Completer is the completion writer of one replica (docs/performance.md
// "The completion writer"): Complete prepares a completion in the caller's
// goroutine and hands it to one writer goroutine, which sends what
// concurrent callers handed it in one pipeline (on a Redis Cluster, one per
// node, in parallel), the completions of one queue as one complete.lua
// call of up to completeBatchMax, applied in hand-in order exactly as that
// many calls would be, and gives each caller its own reply.
//
// Errors stay each caller's: a stale lease is its caller's ErrStaleLease,
// an error a completion raises inside the script fails only its caller
// (docs/performance.md "What a failing completion means"); an error reply
// of a whole call fails that call's completions, a connection error those
// of the pipeline. Close flushes what is queued and stops the writer;
// Complete after Close runs directly (Store.Complete). It is safe for
// concurrent use.
type Completer struct {
	s *Store
	w *batch.Writer[*completion]
	// sole caches soleQueue per queue (its due set's key -> soleSeen) for
	// soleTTL, so a refill costs no organisation lookup per attempt
	sole sync.Map
}

// soleSeen is one cached soleQueue answer and when it was found.
type soleSeen struct {
	ok bool
	at time.Time
}

// soleTTL is how long CompleteAndClaim trusts a queue's soleQueue answer:
// an organisation whose first callout reaches a queue with refills going
// waits at most this long (and the next ClaimBatch round) for its share.
const soleTTL = time.Second

// NewCompleter returns a Completer on s and starts its writer goroutine;
// o's zero value works (batch.Options gives the defaults).
func NewCompleter(s *Store, o batch.Options) *Completer {
	return &Completer{s: s, w: batch.New(s.writeBatch, o)}
}

// Complete is Store.Complete through the writer: same arguments, result
// and errors; it returns when its own completion's reply is in (or ctx
// ends first: the completion may still be applied, as with any Redis call
// cut short).
func (c *Completer) Complete(ctx context.Context, cl *policy.Claimed, comp policy.Completion) (policy.CompleteResult, error) {
	p, err := c.s.prepareComplete(ctx, cl, comp)
	if err != nil {
		return policy.CompleteResult{}, err
	}
	handed, err := c.w.Do(ctx, p)
	if err != nil {
		return policy.CompleteResult{}, c.s.wrap("complete", err)
	}
	if !handed {
		c.s.writeCompletions(ctx, []*completion{p})
	}
	return c.s.finishComplete(ctx, p)
}

// CompleteAndClaim is Complete, and the same complete.lua call then
// claims up to want due callouts of cl's queue (the caller's free slots for
// its endpoint, the one this attempt frees included) under leases of
// lease (docs/performance.md "A claim in the same call"): completions of
// one queue that share a call share its claim, each getting up to its want
// in order. The claim sees the gate the completions left, claims behind an
// open gate only (a probe is ClaimBatch's), in due order, and is asked only
// for the one organisation queue of its shard this replica knows of, so the
// fair share between organisations (fair.Spread) stays ClaimBatch's. The
// claim's result has the callouts it leased to the caller (run them, or the
// reaper returns them when their leases expire) and the gate it saw (""
// when no claim was made); it is returned with the completion's error too
// (a stale lease still frees its slot). Errors: Complete's.
func (c *Completer) CompleteAndClaim(ctx context.Context, cl *policy.Claimed, comp policy.Completion, want int,
	lease time.Duration) (policy.CompleteResult, policy.ClaimResult, error) {
	p, err := c.s.prepareComplete(ctx, cl, comp)
	if err != nil {
		return policy.CompleteResult{}, policy.ClaimResult{}, err
	}
	if want > 0 && lease > 0 && c.soleQueue(ctx, p.q, p.now) {
		p.next = &nextClaim{want: min(want, maxBatch), lease: lease}
	}
	handed, err := c.w.Do(ctx, p)
	if err != nil {
		return policy.CompleteResult{}, policy.ClaimResult{}, c.s.wrap("complete", err)
	}
	if !handed {
		c.s.writeCompletions(ctx, []*completion{p})
	}
	res, err := c.s.finishComplete(ctx, p)
	var next policy.ClaimResult
	if p.next != nil {
		next = p.next.res
	}
	return res, next, err
}

// soleQueue is Store.soleQueue, cached for soleTTL.
func (c *Completer) soleQueue(ctx context.Context, q queue, now time.Time) bool {
	if v, ok := c.sole.Load(q.Due); ok {
		if seen := v.(soleSeen); now.Sub(seen.at) < soleTTL && !now.Before(seen.at) {
			return seen.ok
		}
	}
	ok := c.s.soleQueue(ctx, q)
	c.sole.Store(q.Due, soleSeen{ok: ok, at: now})
	return ok
}

// soleQueue reports whether q is the only organisation queue of its shard
// this replica knows of (queues.Tracker.Orgs, refreshed by every claim
// round): a claim of q alone then takes what a ClaimBatch of the shard
// would.
func (s *Store) soleQueue(ctx context.Context, q queue) bool {
	qs, err := s.queues.Orgs(ctx, q.Endpoint, false)
	if err != nil {
		return false
	}
	n := 0
	for _, o := range qs {
		if o.Shard == q.Shard {
			if o.Due != q.Due {
				return false
			}
			n++
		}
	}
	return n == 1
}

// Close stops taking completions into the queue, writes every one queued
// and stops the writer. It returns when they are written. Safe to call
// more than once.
func (c *Completer) Close() { c.w.Close() }

// writeBatch sends one batch in one pipeline (writeCompletions: one
// complete.lua call per queue); each caller then reads its own reply
// (finishComplete), so an error one completion raised is its alone.
func (s *Store) writeBatch(ctx context.Context, ps []*completion) {
	if err := s.writeCompletions(ctx, ps); err != nil && errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("redisstore: completion pipeline timed out", "completions", len(ps))
	}
}
