package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// CompleterOptions configure a Completer. The zero value works.
type CompleterOptions struct {
	// Linger is how long the writer waits, after the first completion of a
	// batch, for more to join it — only while completions are arriving
	// concurrently (the previous batch held more than one), so a lone
	// completion is never delayed. What arrives while a pipeline is out
	// joins the next one whatever Linger is. Default 200 µs (BenchmarkKeyedWrite:
	// 1.21 round trips per keyed write from 8 callers, against 1.13 at 1 ms
	// and 1.35 with none, at less wait; docs/performance.md); negative:
	// never wait.
	Linger time.Duration
	// MaxBatch is the most completions in one pipeline. Default 256.
	MaxBatch int
	// Queue is how many completions may wait for the writer; past it,
	// Complete waits for room (or its context). Default 4096.
	Queue int
	// Timeout bounds one pipeline's round trip. Default 5 s.
	Timeout time.Duration
}

// DefaultLinger is CompleterOptions.Linger's default.
const DefaultLinger = 200 * time.Microsecond

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
	s    *Store
	o    CompleterOptions
	in   chan *queued
	done chan struct{}
	mu   sync.RWMutex // held for reading while handing in; Close takes it to stop
	shut bool
}

// queued is one completion handed to the writer.
type queued struct {
	p     *completion
	ready chan struct{}
}

// NewCompleter returns a Completer on s and starts its writer goroutine.
func NewCompleter(s *Store, o CompleterOptions) *Completer {
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	c := &Completer{s: s, o: o, in: make(chan *queued, o.Queue), done: make(chan struct{})}
	go c.run()
	return c
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
	q := &queued{p: p, ready: make(chan struct{})}
	c.mu.RLock()
	if c.shut {
		c.mu.RUnlock()
		c.s.writeCompletions(ctx, []*completion{p})
		return c.s.finishComplete(ctx, p)
	}
	select {
	case c.in <- q:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		return policy.CompleteResult{}, c.s.wrap("complete", ctx.Err())
	}
	select {
	case <-q.ready:
		return c.s.finishComplete(ctx, p)
	case <-ctx.Done():
		return policy.CompleteResult{}, c.s.wrap("complete", ctx.Err())
	}
}

// Close stops taking completions into the queue, writes every one queued
// and stops the writer. It returns when they are written. Safe to call
// more than once.
func (c *Completer) Close() {
	c.mu.Lock()
	if !c.shut {
		c.shut = true
		close(c.in)
	}
	c.mu.Unlock()
	<-c.done
}

// run is the writer goroutine.
func (c *Completer) run() {
	defer close(c.done)
	var batch []*queued
	concurrent := false
	for first := range c.in {
		batch = append(batch[:0], first)
		batch = c.fill(batch, concurrent)
		concurrent = len(batch) > 1
		c.write(batch)
	}
}

// fill adds what is queued to batch, up to MaxBatch, and while linger is
// on waits up to Linger for more.
func (c *Completer) fill(batch []*queued, linger bool) []*queued {
	var timer <-chan time.Time
	if linger && c.o.Linger > 0 {
		t := time.NewTimer(c.o.Linger)
		defer t.Stop()
		timer = t.C
	}
	for len(batch) < c.o.MaxBatch {
		select {
		case q, ok := <-c.in:
			if !ok {
				return batch
			}
			batch = append(batch, q)
			continue
		default:
		}
		if timer == nil {
			return batch
		}
		select {
		case q, ok := <-c.in:
			if !ok {
				return batch
			}
			batch = append(batch, q)
		case <-timer:
			return batch
		}
	}
	return batch
}

// write sends batch in one pipeline (writeCompletions: one complete.lua
// call per queue) and releases its callers. Each caller gets its own reply
// (finishComplete), so an error one completion raised is its alone.
func (c *Completer) write(batch []*queued) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	ps := make([]*completion, len(batch))
	for i, q := range batch {
		ps[i] = q.p
	}
	err := c.s.writeCompletions(ctx, ps)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		c.s.log.Warn("redisstore: completion pipeline timed out", "completions", len(batch))
	}
	for _, q := range batch {
		close(q.ready)
	}
}
