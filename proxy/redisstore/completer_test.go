package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// pipeHook counts the pipelines a client sends and can hold the first one
// until released, so a test knows what the writer batches.
type pipeHook struct {
	pipelines, cmds atomic.Int64  // pipelines of scripts, and their commands
	singles         atomic.Int64  // commands sent alone
	hold            chan struct{} // nil: hold nothing
	held            chan struct{} // closed when the first pipeline is held
	armed           atomic.Bool   // hold the next pipeline of scripts
}

func (h *pipeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pipeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.singles.Add(1)
		return next(ctx, cmd)
	}
}
func (h *pipeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "evalsha" && cmds[0].Name() != "fcall" {
			return next(ctx, cmds)
		}
		h.pipelines.Add(1)
		if h.hold != nil && h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.hold
		}
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// hookedStore is a Store on its own client to e's backend with hook h.
func hookedStore(t *testing.T, e *env, h *pipeHook) *Store { return hookedStoreB(t, e, h) }

func hookedStoreB(t testing.TB, e *env, h *pipeHook) *Store {
	t.Helper()
	var c redis.UniversalClient
	switch {
	case e.b.Mini != nil:
		c = redis.NewClient(&redis.Options{Addr: e.b.Mini.Addr(), DisableIdentity: true})
	case e.b.Cluster():
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(redistest.EnvCluster), ","),
			DisableIdentity: true})
	default:
		opt, err := redis.ParseURL(os.Getenv(redistest.EnvURL))
		if err != nil {
			t.Fatal(err)
		}
		opt.DisableIdentity = true
		c = redis.NewClient(opt)
	}
	t.Cleanup(func() { c.Close() })
	c.AddHook(h)
	s := e.store()
	s.rdb = c
	return s
}

// begun starts n synchronous keyed callouts of endpoint.
func begun(t *testing.T, s *Store, endpoint string, n int) []*policy.Claimed {
	t.Helper()
	out := make([]*policy.Claimed, n)
	for i := range out {
		r, err := s.Begin(ctxT(t), req(endpoint, fmt.Sprintf("k-%d", i), "{}"), policy.BeginOptions{Lease: testLease})
		if err != nil || r.Claimed == nil {
			t.Fatalf("begin %d: %+v, %v", i, r, err)
		}
		out[i] = r.Claimed
	}
	return out
}

// waitQueued waits until the writer's queue holds n completions (the
// callers handing them in run in their own goroutines).
func waitQueued(t *testing.T, c *Completer, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.w.Queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d completions queued, want %d", c.w.Queued(), n)
		}
		runtime.Gosched()
	}
}

// completeAll completes every callout of cls through c as a success, each
// in its own goroutine; the results are in once the returned func returns.
func completeAll(c *Completer, cls []*policy.Claimed) ([]policy.CompleteResult, []error, func()) {
	res := make([]policy.CompleteResult, len(cls))
	errs := make([]error, len(cls))
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Go(func() { res[i], errs[i] = c.Complete(context.Background(), cl, success()) })
	}
	return res, errs, wg.Wait
}

// heldPipeline is n keyed callouts of one endpoint begun on a Store whose
// client carries a pipeHook (counters at 0, armed to hold the next
// pipeline of scripts), and a Completer over that Store.
type heldPipeline struct {
	h   *pipeHook
	s   *Store
	cls []*policy.Claimed
	c   *Completer
}

func newHeldPipeline(t *testing.T, e *env, endpoint string, n int, o batch.Options) *heldPipeline {
	t.Helper()
	h := &pipeHook{hold: make(chan struct{}), held: make(chan struct{})}
	s := hookedStore(t, e, h)
	cls := begun(t, s, endpoint, n)
	h.pipelines.Store(0)
	h.cmds.Store(0)
	h.armed.Store(true)
	return &heldPipeline{h: h, s: s, cls: cls, c: NewCompleter(s, o)}
}

// holdFirst completes the first callout and returns once the hook holds
// its pipeline, with that completion's results as completeAll gives them.
func (p *heldPipeline) holdFirst() ([]policy.CompleteResult, []error, func()) {
	res, errs, wait := completeAll(p.c, p.cls[:1])
	<-p.h.held
	return res, errs, wait
}

// What concurrent callers hand the writer while a pipeline is out goes in
// the next pipeline, all of it: 20 completions, 2 pipelines; each caller
// gets its own reply.
func TestCompleterBatchesConcurrentCompletions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := newHeldPipeline(t, e, "batch-api", 20, batch.Options{})
		h, s, cls, c := p.h, p.s, p.cls, p.c
		defer c.Close()
		first, firstErr, waitFirst := p.holdFirst()
		res, errs, wait := completeAll(c, cls[1:])
		waitQueued(t, c, 19)
		close(h.hold)
		waitFirst()
		wait()
		res, errs = append(first, res...), append(firstErr, errs...)
		for i := range cls {
			if errs[i] != nil || res[i].State != policy.Succeeded || res[i].Attempts != 1 {
				t.Fatalf("completion %d = %+v, %v", i, res[i], errs[i])
			}
			if got := mustGet(t, s, cls[i].ID); got.State != policy.Succeeded {
				t.Fatalf("callout %d is %s", i, got.State)
			}
		}
		if n := h.pipelines.Load(); n != 2 {
			t.Fatalf("20 completions went in %d pipelines, want 2 (1, then the 19 queued meanwhile)", n)
		}
	})
}

// A completion whose lease is stale, or whose script fails, fails only its
// own caller; the others of its pipeline — here of the same complete.lua
// call, all of one queue — are applied. The script fails at a Redis error
// (a record that is not a hash: WRONGTYPE) and at a Lua error (a record
// whose byte count is not a number).
func TestCompleterErrorFailsOnlyItsCaller(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := newHeldPipeline(t, e, "err-api", 6, batch.Options{})
		h, s, cls, c := p.h, p.s, p.cls, p.c
		defer c.Close()
		stale := *cls[1]
		stale.LeaseToken = "not-the-lease"
		broken := *cls[2]
		// a record that is not a hash: the script fails at its first read
		q, _ := keyspace.QueueOfID(broken.Endpoint, broken.ID)
		rec, _, _ := q.Record(broken.ID)
		if err := e.b.Client.Del(ctxT(t), rec).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.b.Client.Set(ctxT(t), rec, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		// a record whose byte count is not a number: arithmetic on nil
		garbled := *cls[3]
		grec, _, _ := q.Record(garbled.ID)
		if err := e.b.Client.HSet(ctxT(t), grec, "b", "many").Err(); err != nil {
			t.Fatal(err)
		}
		_, _, waitFirst := p.holdFirst()
		batch := []*policy.Claimed{&stale, &broken, &garbled, cls[4], cls[5]}
		res, errs, wait := completeAll(c, batch)
		waitQueued(t, c, len(batch))
		close(h.hold)
		waitFirst()
		wait()
		if !errors.Is(errs[0], policy.ErrStaleLease) {
			t.Errorf("stale lease: %v, want ErrStaleLease", errs[0])
		}
		if errs[1] == nil || errors.Is(errs[1], policy.ErrStaleLease) || !strings.Contains(errs[1].Error(), "WRONGTYPE") {
			t.Errorf("broken record: %v, want its script's WRONGTYPE error", errs[1])
		}
		if errs[2] == nil || errors.Is(errs[2], policy.ErrStaleLease) || !strings.Contains(errs[2].Error(), "nil") ||
			errors.Is(errs[2], policy.ErrUnavailable) {
			t.Errorf("garbled record: %v, want its script's Lua error (arithmetic on nil)", errs[2])
		}
		for i := 3; i < 5; i++ {
			if errs[i] != nil || res[i].State != policy.Succeeded {
				t.Errorf("completion %d of the same pipeline = %+v, %v", i, res[i], errs[i])
			}
		}
		if got := mustGet(t, s, cls[1].ID); got.State != policy.InFlight {
			t.Errorf("the stale completion changed its callout: %s", got.State)
		}
		if n := h.cmds.Load(); n != 2 {
			t.Errorf("the pipelines held %d script calls, want 2 (the first completion's, then one for the 5 of one queue)", n)
		}
	})
}

// Past the queue bound a caller waits for room (here until its context
// ends); everyone else is still served.
func TestCompleterQueueBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := newHeldPipeline(t, e, "bound-api", 4, batch.Options{Queue: 1})
		h, s, cls, c := p.h, p.s, p.cls, p.c
		defer c.Close()
		_, errA, waitA := p.holdFirst()
		_, errB, waitB := completeAll(c, cls[1:2])
		waitQueued(t, c, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := c.Complete(ctx, cls[2], success())
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("a completion past the queue bound returned at once: %v", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("past the bound: %v, want its context's error", err)
		}
		close(h.hold)
		waitA()
		waitB()
		if errA[0] != nil || errB[0] != nil {
			t.Fatalf("the queued completions: %v, %v", errA[0], errB[0])
		}
		if r, err := c.Complete(ctxT(t), cls[3], success()); err != nil || r.State != policy.Succeeded {
			t.Fatalf("after the queue drained: %+v, %v", r, err)
		}
		if got := mustGet(t, s, cls[2].ID); got.State != policy.InFlight {
			t.Fatalf("the refused completion was applied: %s", got.State)
		}
	})
}

// Close writes everything queued before it returns; a completion after
// Close is written directly.
func TestCompleterCloseFlushes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := newHeldPipeline(t, e, "close-api", 5, batch.Options{})
		h, s, cls, c := p.h, p.s, p.cls, p.c
		_, errs1, wait1 := p.holdFirst()
		_, errs, wait := completeAll(c, cls[1:4])
		waitQueued(t, c, 3)
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		close(h.hold)
		<-closed
		wait1()
		wait()
		for i, err := range append(errs1, errs...) {
			if err != nil {
				t.Fatalf("queued completion %d: %v", i, err)
			}
			if got := mustGet(t, s, cls[i].ID); got.State != policy.Succeeded {
				t.Fatalf("callout %d is %s after Close", i, got.State)
			}
		}
		if r, err := c.Complete(ctxT(t), cls[4], success()); err != nil || r.State != policy.Succeeded {
			t.Fatalf("after Close: %+v, %v", r, err)
		}
	})
}
