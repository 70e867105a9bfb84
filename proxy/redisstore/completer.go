package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
)

// Completer is the completion writer of one replica ("one on the
// way out that is pipelined with other requests' completions"): Complete
// prepares a completion in the caller's goroutine and hands it to one
// writer goroutine, which sends what concurrent callers handed it in one
// pipeline (one round trip for all of them; on a Redis Cluster, one per
// node, in parallel) and gives each caller its own reply. In that
// pipeline the completions of one queue (one counters hash, one slot: an
// endpoint's home queue, or one queue of a sharded endpoint) are one
// complete.lua call, up to completeBatchMax each, applied one after
// another in the order they were handed in, exactly as that many calls
// would be: the script's prelude runs and the counters hash is read and
// written once per call.
//
// Errors stay each caller's: a stale lease is its caller's ErrStaleLease;
// an error a completion raises inside the script (a record of the wrong
// type, a command Redis refuses) is caught there (Lua pcall) and fails
// only its caller, the others of the call are applied as if it were not
// there when it failed before its record was written (after: its counter
// and breaker changes stand with the record; complete.lua "Isolation") —
// and what it wrote before the error stays written, as Redis never
// rolls a script back (the same as when it was a call of its own: a ZREM
// from the lease set, a record HSET). An error reply of the whole call
// (NOSCRIPT twice, a cluster slot error) fails the completions of that
// call; a connection error fails the completions of that pipeline. Close
// flushes what is queued and stops the writer; Complete after Close runs
// directly (Store.Complete), so nothing a shutting-down replica finishes
// goes unrecorded. It is safe for concurrent use.
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
// lease: one script call for an attempt's end and its successors' claim
// instead of a complete.lua and a claim.lua call with its candidates
// pipeline (docs/performance.md "The dispatcher"). Completions of one queue
// that share a call share its claim, each getting up to its want in order.
//
// The claim runs after every completion of the call, so it sees the gate
// they left (a breaker one of them opened, a pause one set: it claims
// nothing); it claims behind an open gate only (a probe is ClaimBatch's)
// and in due order. It is asked only for a queue that is the one
// organisation queue of its shard this replica knows of, so the fair share
// between organisations (fair.Spread) stays ClaimBatch's; on a sharded
// endpoint's other queues it acts on the gate this replica viewed, as
// ClaimBatch does there, and is dropped when a completion of its call
// updates the breaker (outcome.lua runs after it). The claim's result has
// the callouts it leased to the caller (run them, or their leases expire
// and the reaper returns them) and the gate it saw ("" when no claim was
// made); it is returned with the completion's error too (a stale lease
// still frees its slot). Errors: Complete's.
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
