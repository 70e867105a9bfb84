package redisstore

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// handIn hands the completions comps[i] of cls[i] to a new Completer on
// s one after another, in that order (handInEach); it returns each one's
// result and error, and how many script calls their pipeline held.
func handIn(t *testing.T, s *Store, h *pipeHook, holder *policy.Claimed, cls []*policy.Claimed,
	comps []policy.Completion) ([]policy.CompleteResult, []error, int64) {
	t.Helper()
	res := make([]policy.CompleteResult, len(cls))
	errs := make([]error, len(cls))
	calls := handInEach(t, s, h, holder, len(cls), func(c *Completer, i int) {
		res[i], errs[i] = c.Complete(context.Background(), cls[i], comps[i])
	})
	return res, errs, calls
}

// handInEach runs hand(c, i) for i = 0 … n-1, each in its own goroutine,
// on a new Completer c on s, one after another, each once the one before
// is queued, while the writer is held in a pipeline of another completion
// (holder), so all of them go in the next pipeline in that order; it
// returns how many script calls that pipeline held.
func handInEach(t *testing.T, s *Store, h *pipeHook, holder *policy.Claimed, n int, hand func(c *Completer, i int)) int64 {
	t.Helper()
	h.armed.Store(true)
	c := NewCompleter(s, batch.Options{})
	defer c.Close()
	_, holderErr, waitHolder := completeAll(c, []*policy.Claimed{holder})
	<-h.held
	before := h.cmds.Load()
	done := make(chan struct{}, n)
	for i := range n {
		go func() {
			hand(c, i)
			done <- struct{}{}
		}()
		waitQueued(t, c, i+1)
	}
	close(h.hold)
	waitHolder()
	for range n {
		<-done
	}
	if holderErr[0] != nil {
		t.Fatalf("the holding completion: %v", holderErr[0])
	}
	return h.cmds.Load() - before - 1
}

// mixedCompletions is a sequence of completions over the breaker's life
// (threshold 3) for the 11 claimed callouts cls of one endpoint: counting
// failures and a dead letter open the breaker at item 4; item 5, a
// success while open, closes it and then raises an error in complete.lua
// at its last step, after its record was written (the record of the dead
// letter it "replays" is a string): its success stands, so the later
// failure is scheduled, not held, the inline retry is accepted, and the
// last success ends the outage the failure began. Item 3 is stale
// (another lease token).
func mixedCompletions(t *testing.T, e *env, cls []*policy.Claimed) ([]*policy.Claimed, []policy.Completion) {
	t.Helper()
	br := policy.BreakerSettings{Failures: 3, ProbeInterval: time.Minute}
	later := e.clk.Now().Add(time.Hour)
	fail := func(counts bool) policy.Completion {
		c := failure(later)
		c.CountsTowardBreaker, c.Breaker = counts, br
		return c
	}
	ok := success()
	ok.Breaker = br
	dead := fail(true)
	dead.Action, dead.Reason = policy.ActionDeadLetter, policy.DeadLetterExhausted
	inline := fail(true)
	inline.Action, inline.Lease = policy.ActionRetryInline, testLease
	undispatched := policy.Completion{Action: policy.ActionRetry, NextAttemptAt: later, Breaker: br}
	comps := []policy.Completion{ok, fail(true), dead, ok, fail(true), ok, fail(true), inline, undispatched, ok, fail(false)}
	if len(cls) != len(comps) {
		t.Fatalf("%d callouts for %d completions", len(cls), len(comps))
	}
	out := make([]*policy.Claimed, len(cls))
	copy(out, cls)
	stale := *cls[3]
	stale.LeaseToken = "not-the-lease"
	out[3] = &stale
	broken := *cls[5]
	n, _ := keyspace.ShardOfID(broken.ID)
	broken.ReplayOf = keyspace.IDOfRaw(n, "0123456789abcdef")
	rk, _ := keyspace.Callout(broken.ReplayOf)
	if err := e.b.Client.Set(ctxT(t), rk, "not a record", 0).Err(); err != nil {
		t.Fatal(err)
	}
	out[5] = &broken
	return out, comps
}

// claimN enqueues n callouts of endpoint and claims them all.
func claimN(t *testing.T, s *Store, endpoint string, n int) []*policy.Claimed {
	t.Helper()
	mustEnqueue(t, s, endpoint, n)
	cls := mustClaim(t, s, endpoint, ClaimOptions{Batch: n, Lease: testLease}).Claimed
	if len(cls) != n {
		t.Fatalf("claimed %d of %d", len(cls), n)
	}
	return cls
}

// A batch of completions of one queue in one complete.lua call gives
// exactly what the same completions applied one by one give: each result
// (breaker opened at the same item, held counts, the owner told once, the
// refused inline retry), the stale one's ErrStaleLease and the failing
// one's error to their callers only, and the same endpoint hash (breaker,
// counters bb/bi and the issuer's) and callouts afterwards. Two endpoints
// interleaved: two calls in the pipeline, one per queue.
func TestBatchedCompletionsMatchOneByOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := &pipeHook{hold: make(chan struct{}), held: make(chan struct{})}
		s := hookedStore(t, e, h)
		eps := []string{"bat-a", "bat-b", "seq-a", "seq-b"}
		cls := map[string][]*policy.Claimed{}
		comps := map[string][]policy.Completion{}
		for _, ep := range eps {
			cls[ep], comps[ep] = mixedCompletions(t, e, claimN(t, s, ep, 11))
		}
		holder := claimN(t, s, "holder-api", 1)[0]

		// the batch: bat-a and bat-b interleaved, through the writer
		var bcls []*policy.Claimed
		var bcomps []policy.Completion
		for i := range 11 {
			for _, ep := range eps[:2] {
				bcls, bcomps = append(bcls, cls[ep][i]), append(bcomps, comps[ep][i])
			}
		}
		bres, berrs, calls := handIn(t, s, h, holder, bcls, bcomps)
		if calls != 2 {
			t.Errorf("22 completions of two queues went in %d script calls, want 2", calls)
		}
		// one by one: seq-a and seq-b, same order, each its own call
		var sres []policy.CompleteResult
		var serrs []error
		for i := range 11 {
			for _, ep := range eps[2:] {
				r, err := s.Complete(ctxT(t), cls[ep][i], comps[ep][i])
				sres, serrs = append(sres, r), append(serrs, err)
			}
		}

		for i := range bres {
			b, q := bres[i], sres[i]
			b.Breaker.OutageStartedAt, q.Breaker.OutageStartedAt = b.Breaker.OutageStartedAt.UTC(), q.Breaker.OutageStartedAt.UTC()
			if !reflect.DeepEqual(b, q) {
				t.Errorf("completion %d: batched %+v, one by one %+v", i, b, q)
			}
			if (berrs[i] == nil) != (serrs[i] == nil) || errors.Is(berrs[i], policy.ErrStaleLease) != errors.Is(serrs[i], policy.ErrStaleLease) {
				t.Errorf("completion %d: batched error %v, one by one %v", i, berrs[i], serrs[i])
			}
		}
		// what the sequence must do, on each endpoint
		for k, ep := range eps[:2] {
			at := func(i int) (policy.CompleteResult, error) { return bres[2*i+k], berrs[2*i+k] }
			r2, _ := at(2)
			r4, _ := at(4)
			r6, _ := at(6)
			r7, _ := at(7)
			r9, _ := at(9)
			if _, err := at(3); !errors.Is(err, policy.ErrStaleLease) {
				t.Errorf("%s: stale lease: %v", ep, err)
			}
			if _, err := at(5); err == nil || errors.Is(err, policy.ErrStaleLease) ||
				!strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("%s: the failing completion: %v, want its WRONGTYPE error", ep, err)
			}
			if !r2.NotifyOwner || r2.State != policy.DeadLettered {
				t.Errorf("%s: the dead letter = %+v, want the owner told", ep, r2)
			}
			if !r4.Breaker.Opened || r4.State != policy.Held || r4.Breaker.Held != 1 || r4.Breaker.ConsecutiveFailures != 3 {
				t.Errorf("%s: the third counting failure = %+v, want the breaker opened and item 1 held", ep, r4)
			}
			if r6.State != policy.Scheduled || r6.Breaker.ConsecutiveFailures != 1 || !r6.Breaker.OutageBegan {
				t.Errorf("%s: a failure after the failing success = %+v, want scheduled (its success closed the breaker)", ep, r6)
			}
			if r7.State != policy.InFlight {
				t.Errorf("%s: the inline retry after it = %+v, want accepted (in flight)", ep, r7)
			}
			if r9.Breaker.Closed || !r9.Breaker.OutageEnded {
				t.Errorf("%s: the last success = %+v, want the outage ended (the breaker was closed already)", ep, r9.Breaker)
			}
		}
		for k, ep := range eps[:2] {
			seq := eps[2+k]
			bh := e.b.Client.HGetAll(ctxT(t), keyspace.QueueAt(ep, keyspace.ShardOf(ep)).Counters).Val()
			sh := e.b.Client.HGetAll(ctxT(t), keyspace.QueueAt(seq, keyspace.ShardOf(seq)).Counters).Val()
			if !reflect.DeepEqual(bh, sh) || bh["bi"] == "" {
				t.Errorf("endpoint hash: batched %v, one by one %v", bh, sh)
			}
			for i := range 11 {
				b, q := mustGet(t, s, cls[ep][i].ID), mustGet(t, s, cls[seq][i].ID)
				if b.State != q.State || b.Attempts != q.Attempts || !b.NextAttemptAt.Equal(q.NextAttemptAt) {
					t.Errorf("callout %d: batched %s/%d/%v, one by one %s/%d/%v", i, b.State, b.Attempts, b.NextAttemptAt,
						q.State, q.Attempts, q.NextAttemptAt)
				}
			}
		}
	})
}

// A queue's completions past completeBatchMax go in further calls of the
// same pipeline, in order; each caller still gets its own result.
func TestBatchedCompletionsSplitAtMax(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := &pipeHook{hold: make(chan struct{}), held: make(chan struct{})}
		s := hookedStore(t, e, h)
		n := completeBatchMax + 8
		cls := claimN(t, s, "split-api", n)
		holder := claimN(t, s, "holder-api", 1)[0]
		comps := make([]policy.Completion, n)
		for i := range comps {
			comps[i] = success()
		}
		res, errs, calls := handIn(t, s, h, holder, cls, comps)
		if calls != 2 {
			t.Errorf("%d completions of one queue went in %d script calls, want 2", n, calls)
		}
		for i := range cls {
			if errs[i] != nil || res[i].State != policy.Succeeded {
				t.Fatalf("completion %d = %+v, %v", i, res[i], errs[i])
			}
		}
		if bi := e.b.Client.HGet(ctxT(t), keyspace.QueueAt("split-api", keyspace.ShardOf("split-api")).Counters, "bi").Val(); bi != "" {
			t.Fatalf("all ended, %s still counted pending", bi)
		}
	})
}

// Completions of a sharded endpoint (shards: 2) are batched per queue: its
// home queue applies the breaker in its call, its other queue's calls
// carry the gate read and each completion's breaker update is its own
// outcome.lua call, placed where it was handed in, so the endpoint hash
// sees the results in their order: the third counting failure opens the
// breaker, whichever queue it is in.
func TestBatchedCompletionsSharded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := &pipeHook{hold: make(chan struct{}), held: make(chan struct{})}
		s := hookedStore(t, e, h)
		sh := shardedStore(e, "wide-api", 2)
		sh.rdb = s.rdb
		var cls []*policy.Claimed
		for range 8 {
			mustEnqueueReq(t, sh, req("wide-api", "", "{}"))
		}
		cls = claimEvery(t, sh, "wide-api")
		if len(cls) != 8 {
			t.Fatalf("claimed %d", len(cls))
		}
		// home and other queue alternating
		var home, other []*policy.Claimed
		for _, cl := range cls {
			if n, _ := keyspace.ShardOfID(cl.ID); n == keyspace.ShardOf("wide-api") {
				home = append(home, cl)
			} else {
				other = append(other, cl)
			}
		}
		if len(home) != 4 || len(other) != 4 {
			t.Fatalf("callouts %d in the home queue, %d in the other, want 4 and 4", len(home), len(other))
		}
		cls = nil
		for i := range home {
			cls = append(cls, home[i], other[i])
		}
		// the scripts known to Redis: no NOSCRIPT reruns after the pipeline
		if err := sh.rdb.ScriptLoad(ctxT(t), sh.lua.complete.Source()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := sh.rdb.ScriptLoad(ctxT(t), sh.lua.outcome.Source()).Err(); err != nil {
			t.Fatal(err)
		}
		holder := claimN(t, s, "holder-api", 1)[0]
		br := policy.BreakerSettings{Failures: 3, ProbeInterval: time.Minute}
		comps := make([]policy.Completion, 8)
		for i := range comps {
			comps[i] = failure(e.clk.Now().Add(time.Hour))
			comps[i].Breaker = br
		}
		comps[0] = success()
		res, errs, calls := handIn(t, sh, h, holder, cls, comps)
		opened := 0
		for i := range cls {
			if errs[i] != nil {
				t.Fatalf("completion %d: %v", i, errs[i])
			}
			if res[i].Breaker.Opened {
				opened++
				if i != 3 {
					t.Errorf("completion %d opened the breaker, want the third failure (3)", i)
				}
			}
			if i > 0 && res[i].Breaker.ConsecutiveFailures != i {
				t.Errorf("completion %d: %d consecutive failures, want %d", i, res[i].Breaker.ConsecutiveFailures, i)
			}
		}
		if opened != 1 {
			t.Errorf("%d completions opened the breaker, want 1", opened)
		}
		st := mustState(t, sh, "wide-api")
		if st.ConsecutiveFailures != 7 || st.Breaker != policy.BreakerOpen {
			t.Errorf("endpoint after the batch: %+v", st)
		}
		var pending int64
		for _, n := range keyspace.QueueShards("wide-api", 2) {
			v, _ := e.b.Client.HGet(ctxT(t), keyspace.QueueAt("wide-api", n).Counters, "bi").Int64()
			pending += v
		}
		if pending != 7 {
			t.Errorf("%d callouts counted pending over the queues, want the 7 retries", pending)
		}
		// h o h o h o h o: the home queue's call is split where one of the
		// other queue's breaker updates comes between (4 calls), the other
		// queue's completions are one call, its 4 failures' breaker
		// updates 4 more
		if calls != 9 {
			t.Errorf("%d script calls, want 9 (4 of the home queue, 1 of the other and its 4 breaker updates)", calls)
		}
	})
}

// After a SCRIPT FLUSH (a restarted Redis) the batch's call is refused
// with NOSCRIPT and runs again once by EVAL: every completion of it is
// applied, once.
func TestBatchedCompletionsAfterScriptFlush(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		h := &pipeHook{hold: make(chan struct{}), held: make(chan struct{})}
		s := hookedStore(t, e, h)
		cls := claimN(t, s, "flush-api", 3)
		holder := claimN(t, s, "holder-api", 1)[0]
		if err := s.rdb.ScriptFlush(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		comps := []policy.Completion{success(), failure(e.clk.Now().Add(time.Hour)), success()}
		res, errs, calls := handIn(t, s, h, holder, cls, comps)
		if calls != 1 {
			t.Errorf("3 completions of one queue went in %d script calls, want 1", calls)
		}
		want := []policy.State{policy.Succeeded, policy.Scheduled, policy.Succeeded}
		for i := range cls {
			if errs[i] != nil || res[i].State != want[i] || res[i].Attempts != 1 {
				t.Errorf("completion %d = %+v, %v; want %s after 1 attempt", i, res[i], errs[i], want[i])
			}
		}
		if got := mustGet(t, s, cls[1].ID); got.State != policy.Scheduled || got.Attempts != 1 || len(got.AttemptLog) != 1 {
			t.Errorf("the retry: %s, %d attempts, %d logged; want scheduled with 1", got.State, got.Attempts, len(got.AttemptLog))
		}
	})
}

// An error a completion raised inside complete.lua is classified as the
// Redis error it carries: a READONLY (a primary turned replica) is
// ErrUnavailable, as it is when Redis replies it to a call of its own; a
// WRONGTYPE is not.
func TestScriptErrorClassified(t *testing.T) {
	s := New(nil, Options{})
	if err := s.wrap("complete", scriptError("READONLY You can't write against a read only replica.")); !errors.Is(err, policy.ErrUnavailable) {
		t.Errorf("READONLY: %v, want ErrUnavailable", err)
	}
	if err := s.wrap("complete", scriptError("WRONGTYPE Operation against a key holding the wrong kind of value")); errors.Is(err, policy.ErrUnavailable) {
		t.Errorf("WRONGTYPE: %v, want a script error, not ErrUnavailable", err)
	}
}
