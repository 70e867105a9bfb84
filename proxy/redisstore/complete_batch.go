package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// completeBatchMax is the most completions one complete.lua call applies.
// Each costs Redis some 60–80 µs of script time on the development machine
// (docs/performance.md), so 32 keep one script call, during which Redis
// serves no one else, near 2–3 ms — about what it spends on one read of a
// pipelined client's query buffer of single calls anyway — while the
// prelude and the counters hash's read and write are already shared 32
// ways. A larger group of one queue is split into calls of up to 32, in
// order.
const completeBatchMax = 32

// pipeCall is one script call of a completion pipeline: a complete.lua
// call of completions of one queue (one reply each, in order), or an
// outcome.lua breaker update or notify.lua call of one completion (items
// holds its one completion).
type pipeCall struct {
	batch   *completeArgs // callBatch
	typed   *script.Call[completeArgs, completeReply]
	outcome *script.Call[outcomeArgs, outcomeReply] // callBreaker
	told    *script.Call[notifyArgs, toldReply]     // callNotify
	items   []*completion
	kind    int // callBatch, callBreaker, callNotify
	// claimers are the completions of a callBatch whose claim it makes
	// (completion.next), in order; noClaim: one of its completions' breaker
	// update, a call of its own after it (a sharded queue), may shut the
	// gate (a failure, a pause), which the claim could not see: it is not
	// made
	claimers []*completion
	noClaim  bool
}

// nextClaim is the claim a completion's call makes after the completions
// (Completer.CompleteAndClaim): up to want due callouts of its queue under
// leases of lease; res is what it claimed, and the gate it saw.
type nextClaim struct {
	want  int
	lease time.Duration
	res   policy.ClaimResult
}

const (
	callBatch = iota
	callBreaker
	callNotify
)

// planCompletions orders the script calls of ps for one pipeline
// (docs/performance.md "One script call per queue"): the completions of one
// queue share a complete.lua call (up to completeBatchMax, in the order of
// ps), placed where its first completion is; a breaker or notify call is
// placed where its completion is (a sharded queue's dead letter tells the
// owner right after its breaker update, before a later success can end the
// outage). A completion joins its queue's open call only if that moves it
// ahead of no call touching the same keys (an endpoint hash's slot; a
// shard's outbox takes distinct members in any order), so every key sees
// its completions in the order of ps.
func (s *Store) planCompletions(ps []*completion) []*pipeCall {
	var calls []*pipeCall
	open := map[string]int{} // queue (its due set's key) -> its complete.lua call being filled
	last := map[string]int{} // endpoint hash -> the last call touching its slot's keys
	touched := func(ep string) int {
		if i, ok := last[ep]; ok {
			return i
		}
		return -1
	}
	for _, p := range ps {
		q := p.q
		i, ok := open[q.Due]
		if ok && (len(calls[i].items) == completeBatchMax || (q.Home && touched(q.EndpointHash) > i)) {
			ok = false
		}
		if !ok {
			calls = append(calls, &pipeCall{kind: callBatch, batch: &completeArgs{Due: q.Due, Lease: q.Lease,
				Counters: q.Counters, DL: q.DL, DLB: q.DLB, SFO: q.SFO, SFX: q.SFX}})
			i = len(calls) - 1
			open[q.Due] = i
		}
		c := calls[i]
		c.items = append(c.items, p)
		c.batch.Items = append(c.batch.Items, p.item)
		if p.next != nil {
			b := c.batch
			if len(c.claimers) == 0 {
				b.ClaimNow, b.ClaimLease = p.item.Now, p.next.lease.Milliseconds()
				b.ClaimPrefix, _, _ = q.Record("")
				b.ClaimGate, b.ClaimGateUntil, b.ClaimPart = p.item.Gate, p.item.GateUntil, q.Part
			}
			b.ClaimWant = min(b.ClaimWant+p.next.want, maxBatch)
			c.claimers = append(c.claimers, p)
		}
		// a success's breaker update can only open the gate; a failure's or
		// a pause's may shut it after the claim looked
		c.noClaim = c.noClaim || (p.breaker != nil && (!p.breaker.Success || p.breaker.Pause > 0))
		if q.Home {
			last[q.EndpointHash] = max(touched(q.EndpointHash), i)
		}
		if p.breaker != nil {
			calls = append(calls, &pipeCall{items: []*completion{p}, kind: callBreaker})
			last[q.EndpointHash] = len(calls) - 1
		}
		if p.notify != nil {
			calls = append(calls, &pipeCall{items: []*completion{p}, kind: callNotify})
			last[q.EndpointHash] = len(calls) - 1
		}
	}
	for _, c := range calls {
		if c.noClaim && c.batch != nil {
			c.batch.ClaimWant = 0
		}
	}
	return calls
}

// writeCompletions sends ps in one pipeline (planCompletions) and sets
// each one's replies or errors, reading the calls in pipeline order. A
// connection error fails every completion of the pipeline; an error reply
// of a call (a cluster error, NOSCRIPT again after EVAL) fails its
// completions; an error one completion raised inside complete.lua fails
// that one only. A call Redis refused with NOSCRIPT (a restarted or
// flushed Redis: the script did not run) runs again by EVAL after the
// pipeline, in pipeline order, so its completions are applied once but
// after the rest of that pipeline. It returns the pipeline's first error.
func (s *Store) writeCompletions(ctx context.Context, ps []*completion) error {
	calls := s.planCompletions(ps)
	for _, c := range calls {
		if c.kind == callBatch && c.batch.ClaimWant > 0 {
			tok, err := s.token()
			if err != nil {
				c.batch.ClaimWant = 0 // the completions go on; the dispatcher's next round claims
				continue
			}
			c.batch.ClaimToken = tok
		}
	}
	_, err := s.rdb.Pipelined(ctx, func(pp redis.Pipeliner) error {
		for _, c := range calls {
			switch c.kind {
			case callBatch:
				c.typed = s.lua.complete.Queue(ctx, pp, c.batch)
			case callBreaker:
				c.outcome = s.lua.outcome.Queue(ctx, pp, c.items[0].breaker)
			case callNotify:
				c.told = s.lua.notify.Queue(ctx, pp, c.items[0].notify)
			}
		}
		return nil
	})
	for _, c := range calls {
		c.resolve(ctx, s)
	}
	return err
}

// resolve hands each completion of c its own reply from the call's (after
// a NOSCRIPT, the call runs again once, by EVAL: pipe.go result).
func (c *pipeCall) resolve(ctx context.Context, s *Store) {
	switch c.kind {
	case callBreaker:
		p := c.items[0]
		r, err := c.outcome.Result(ctx, s.rdb)
		p.breakerReply, p.breakerErr = r, s.wrap("complete: breaker", err)
		return
	case callNotify:
		p := c.items[0]
		r, err := c.told.Result(ctx, s.rdb)
		p.notifyReply, p.notifyErr = r, s.wrap("notify", err)
		return
	}
	v, err := c.typed.Result(ctx, s.rdb)
	err = s.wrap("complete", err)
	if err == nil && len(v.Results) != len(c.items) {
		err = fmt.Errorf("redisstore: complete: %d replies for %d completions: %+v", len(v.Results), len(c.items), v)
	}
	for i, p := range c.items {
		if err != nil {
			p.err = err
			continue
		}
		if r := v.Results[i]; r.Error != "" {
			p.err = s.wrap("complete "+p.cl.ID, scriptError(r.Error))
			continue
		}
		p.reply = v.Results[i]
	}
	if err == nil {
		s.resolveClaim(ctx, c, v)
	}
}

// resolveClaim hands the callouts the claim after c's completions leased
// to the completions that asked for them (claimers), each up to its want in
// order, with the gate the claim saw. A claimed callout whose record does
// not decode is left to its lease (the reaper returns it).
func (s *Store) resolveClaim(ctx context.Context, c *pipeCall, v completeReply) {
	k := 0
	for _, p := range c.claimers {
		p.next.res.Gate = policy.Gate{State: policy.GateState(v.ClaimGate), Until: msTimeOf(v.ClaimGateUntil)}
		for n := 0; n < p.next.want && k < len(v.Claimed); n++ {
			x := v.Claimed[k]
			k++
			cl, err := s.decodeClaimed(ctx, x, p.now, p.now.Add(p.next.lease))
			if err != nil {
				s.log.Warn("redisstore: a claimed callout does not decode; it is returned after its lease",
					slog.String("callout_id", x.ID), slog.Any("error", err))
				continue
			}
			cl.LeaseToken = x.Token
			p.next.res.Claimed = append(p.next.res.Claimed, cl)
		}
	}
}

// scriptError is the error one completion raised inside complete.lua, as
// Redis would have replied it to a call of its own: a Redis error (the
// message of the command that failed, e.g. "WRONGTYPE …" or "READONLY …",
// or the Lua error), so wrap classifies it as it classifies any Redis
// error reply.
type scriptError string

func (e scriptError) Error() string { return string(e) }

// RedisError marks scriptError as a Redis error reply (redis.Error).
func (scriptError) RedisError() {}

var _ redis.Error = scriptError("")
