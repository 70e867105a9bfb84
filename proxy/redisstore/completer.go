package redisstore

import (
	"context"
	"errors"

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
}

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
