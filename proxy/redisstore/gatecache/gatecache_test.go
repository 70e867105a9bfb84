package gatecache

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// The store's core is the cache's Core.
var _ Core = (*redisstore.Store)(nil)

// t0 is the instant the tests' clocks start at (storetest.T0).
var t0 = storetest.T0()

// cacheBreaker is the breaker of the gate-cache tests: 3 failures, a
// 1-minute probe interval, a 10-second probe lease.
var cacheBreaker = policy.BreakerSettings{Failures: 3, ProbeInterval: time.Minute, ProbeLease: 10 * time.Second}

// env is one backend under test with its clock (storetest.Env), and this
// package's ways to build on it.
type env struct{ *storetest.Env }

// forEachBackend runs fn on every backend (storetest.ForEachBackend).
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	storetest.ForEachBackend(t, func(t *testing.T, se *storetest.Env) { fn(t, &env{se}) })
}

// ctxT is a test's context (storetest.Ctx).
func ctxT(t *testing.T) context.Context { return storetest.Ctx(t) }

// replica is one proxy replica's store and gate cache, wired as
// cmd/callout-proxy wires them: the cache wraps the store's core, which
// tells it of its own gate changes (redisstore.Options.GateChanged).
type replica struct {
	*redisstore.Store
	cache *Cache
	rdb   redis.UniversalClient
}

// newReplica returns a replica on rdb with clock clk and random source rnd.
func newReplica(rdb redis.UniversalClient, clk *clocktest.Clock, rnd io.Reader) *replica {
	r := &replica{rdb: rdb}
	r.Store = redisstore.New(rdb, redisstore.Options{PinScriptTime: true, Now: clk.Now, Rand: rnd,
		GateChanged: func(ep string) { r.cache.Changed(ep) }})
	r.cache = New(r.Store, rdb, Options{Now: clk.Now})
	return r
}

// store returns a new replica on the backend.
func (e *env) store() *replica { return newReplica(e.B.Client, e.Clk, e.Rand()) }

// CachedAdmission and Admit are the replica's read path: its gate cache's.
func (r *replica) CachedAdmission(endpoint string) (policy.Admission, bool) {
	return r.cache.CachedAdmission(endpoint)
}

func (r *replica) Admit(ctx context.Context, endpoint string, br policy.BreakerSettings) (policy.Admission, error) {
	return r.cache.Admit(ctx, endpoint, br)
}

// GateCacheStats is the replica's cache's Stats.
func (r *replica) GateCacheStats() Stats { return r.cache.Stats() }

// pollGates is one backstop poll of the replica's cache.
func (r *replica) pollGates(ctx context.Context) { r.cache.poll(ctx) }

// watching starts s's gate cache (subscription and poll) until the test
// ends, and waits until its subscription is confirmed.
func watching(t *testing.T, s *replica) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.cache.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The subscription is confirmed once a PUBLISH reaches it.
	waitFor(t, "the gate subscription", func() bool {
		_ = s.rdb.Publish(ctx, keyspace.GateChannel, "cp:{test}:ep:nobody").Err()
		return s.GateCacheStats().Messages > 0
	})
	return s
}

// mark is the latest invalidation of s's entry for endpoint (0: none).
func mark(s *replica, endpoint string) uint64 { return s.cache.entry(endpoint).mark.Load() }

// heard waits until s's entry for endpoint was invalidated after before (a
// message reached it).
func heard(t *testing.T, s *replica, endpoint, what string, before uint64) {
	t.Helper()
	waitFor(t, what, func() bool { return mark(s, endpoint) > before })
}

// manual turns s's gate cache on without its subscription and poll: the
// test polls (pollGates) itself.
func manual(s *replica) *replica {
	s.cache.active.Store(true)
	return s
}

// waitFor waits for an asynchronous event (a pub/sub message crossing
// Redis) and fails the test when it has not happened within 10 s. What a
// test asserts never depends on how long it took.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// readGate is the read path's gate decision on replica s: the cache when
// it answers, else Admit. cached says which.
func readGate(t *testing.T, s *replica, endpoint string) (a policy.Admission, cached bool) {
	t.Helper()
	if a, ok := s.CachedAdmission(endpoint); ok {
		return a, true
	}
	a, err := s.Admit(ctxT(t), endpoint, cacheBreaker)
	if err != nil {
		t.Fatal(err)
	}
	return a, false
}

// fail records n counting read failures through s.
func fail(t *testing.T, s *replica, endpoint string, n int) policy.BreakerChange {
	t.Helper()
	var ch policy.BreakerChange
	for range n {
		var err error
		if ch, err = s.RecordResult(ctxT(t), endpoint, policy.ReadResult{CountsTowardBreaker: true, Breaker: cacheBreaker}); err != nil {
			t.Fatal(err)
		}
	}
	return ch
}

// TestGateCacheHealthyRead: a healthy endpoint's gate is answered from
// memory after the first read (CachedAdmission has no context: it cannot
// reach Redis), with the failure count Lua returned; without Run
// nothing is cached.
func TestGateCacheHealthyRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		off := e.store()
		if _, err := off.Admit(ctxT(t), "healthy-api", cacheBreaker); err != nil {
			t.Fatal(err)
		}
		if _, ok := off.CachedAdmission("healthy-api"); ok {
			t.Fatal("a store without Run answered from a cache")
		}

		s := watching(t, e.store())
		if a, cached := readGate(t, s, "healthy-api"); cached || a.Gate.State != policy.GateOpen {
			t.Fatalf("first read = %+v cached %v, want open from Redis", a, cached)
		}
		for range 3 {
			if a, cached := readGate(t, s, "healthy-api"); !cached || a.Gate.State != policy.GateOpen || a.ConsecutiveFailures != 0 {
				t.Fatalf("read of a healthy endpoint = %+v cached %v, want open from memory", a, cached)
			}
		}
		if st := s.GateCacheStats(); st.Hits != 3 || st.Misses != 1 {
			t.Fatalf("stats = %+v, want 3 hits and 1 miss", st)
		}
		// One failure: the cached count is no longer 0, so a success
		// must be recorded (and resets it).
		if ch := fail(t, s, "healthy-api", 1); !ch.OutageBegan {
			t.Fatalf("first failure = %+v", ch)
		}
		a, _ := readGate(t, s, "healthy-api")
		if a.Gate.State != policy.GateOpen || a.ConsecutiveFailures != 1 {
			t.Fatalf("read after a failure = %+v, want open with 1 failure", a)
		}
	})
}

// TestGateCacheBreakerOpensOnAnotherReplica: replica B caches an open gate;
// the breaker opens through replica A; once the gate-change message reached
// B, B refuses reads (from memory after one Redis reading) until the probe
// time, and then asks Redis, where exactly one read takes the probe token.
func TestGateCacheBreakerOpensOnAnotherReplica(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, b := watching(t, e.store()), watching(t, e.store())
		if g, _ := readGate(t, b, "pub-api"); g.Gate.State != policy.GateOpen {
			t.Fatalf("B's first read = %+v", g)
		}
		if _, cached := readGate(t, b, "pub-api"); !cached {
			t.Fatal("B's second read was not answered from memory")
		}
		if ch := fail(t, a, "pub-api", 2); !ch.OutageBegan && ch.ConsecutiveFailures != 2 {
			t.Fatalf("two failures through A = %+v", ch)
		}
		// The first failure's message (the count left 0) is B's first
		// invalidation; B reads again, then the opening's message is the
		// second one.
		heard(t, b, "pub-api", "B hearing of the first failure", 0)
		if g, _ := readGate(t, b, "pub-api"); g.Gate.State != policy.GateOpen || g.ConsecutiveFailures != 2 {
			t.Fatalf("B after the failures = %+v, want open with 2 failures", g)
		}
		before := mark(b, "pub-api")
		if ch := fail(t, a, "pub-api", 1); !ch.Opened {
			t.Fatalf("third failure through A = %+v, want opened", ch)
		}
		heard(t, b, "pub-api", "B hearing of the opening", before)
		probeAt := t0.Add(time.Minute)
		for i := range 3 {
			g, cached := readGate(t, b, "pub-api")
			if g.Gate.State != policy.GateBreakerOpen || !g.Gate.Until.Equal(probeAt) {
				t.Fatalf("B's read %d after the message = %+v, want breaker_open until %v", i, g, probeAt)
			}
			if i > 0 && !cached {
				t.Fatalf("B's read %d of the open breaker asked Redis again", i)
			}
		}
		// The probe time is reached: the cached Until ends the entry, no
		// poll needed, and the probe is taken in Redis by one read only.
		e.Clk.Set(probeAt)
		var probes, refused int
		for _, s := range []*replica{a, b, a, b} {
			g, cached := readGate(t, s, "pub-api")
			switch {
			case g.ProbeToken != "" && !cached:
				probes++
			case g.Gate.State == policy.GateProbing:
				refused++
			default:
				t.Fatalf("read at the probe time = %+v cached %v", g, cached)
			}
		}
		if probes != 1 || refused != 3 {
			t.Fatalf("%d probes and %d refused at the probe time, want 1 and 3", probes, refused)
		}
	})
}

// TestGateCacheExactlyOneProbe: 40 concurrent reads through two caching
// replicas at the probe time take the probe token once.
func TestGateCacheExactlyOneProbe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		reps := []*replica{watching(t, e.store()), watching(t, e.store())}
		for _, s := range reps {
			readGate(t, s, "one-probe-api")
		}
		before := mark(reps[1], "one-probe-api")
		fail(t, reps[0], "one-probe-api", 3)
		heard(t, reps[1], "one-probe-api", "the other replica hearing of the failures", before)
		e.Clk.Advance(time.Minute)
		var mu sync.Mutex
		tokens := 0
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				s := reps[i%2]
				a, ok := s.CachedAdmission("one-probe-api")
				if !ok {
					var err error
					if a, err = s.Admit(context.Background(), "one-probe-api", cacheBreaker); err != nil {
						t.Error(err)
						return
					}
				}
				switch {
				case a.ProbeToken != "":
					mu.Lock()
					tokens++
					mu.Unlock()
				case a.Gate.State != policy.GateProbing:
					t.Errorf("a read at the probe time = %+v, want the probe or probing", a)
				}
			})
		}
		wg.Wait()
		if tokens != 1 {
			t.Fatalf("%d reads took the probe token, want exactly 1", tokens)
		}
	})
}

// TestGateCachePollBackstop: without any message (no subscription), a
// replica's stale view of an open gate ends at its next poll, or once the
// reading is older than MaxStale — the bound holds without pub/sub.
func TestGateCachePollBackstop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a := e.store()
		b, c := manual(e.store()), manual(e.store())
		for _, s := range []*replica{b, c} {
			readGate(t, s, "poll-api")
		}
		fail(t, a, "poll-api", 3)
		for _, s := range []*replica{b, c} {
			if g, cached := readGate(t, s, "poll-api"); !cached || g.Gate.State != policy.GateOpen {
				t.Fatalf("before any poll = %+v cached %v, want the stale open gate from memory", g, cached)
			}
		}
		// B: one poll tick.
		b.pollGates(ctxT(t))
		if g, cached := readGate(t, b, "poll-api"); !cached || g.Gate.State != policy.GateBreakerOpen {
			t.Fatalf("B after one poll = %+v cached %v, want breaker_open from memory", g, cached)
		}
		// C: no poll, but its reading ages past MaxStale.
		e.Clk.Advance(DefaultMaxStale)
		if _, cached := readGate(t, c, "poll-api"); !cached {
			t.Fatal("C's reading at exactly MaxStale was not used")
		}
		e.Clk.Advance(time.Millisecond)
		if g, cached := readGate(t, c, "poll-api"); cached || g.Gate.State != policy.GateBreakerOpen {
			t.Fatalf("C past MaxStale = %+v cached %v, want breaker_open from Redis", g, cached)
		}
	})
}

// TestGateCacheOwnTransitions: a transition this replica's own script
// reports (the breaker opening, a pause, a disable) invalidates its entry
// at once, before any message or poll.
func TestGateCacheOwnTransitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := manual(e.store())
		readGate(t, s, "own-api")
		fail(t, s, "own-api", 3)
		if g, cached := readGate(t, s, "own-api"); cached || g.Gate.State != policy.GateBreakerOpen {
			t.Fatalf("after its own opening = %+v cached %v, want breaker_open from Redis", g, cached)
		}

		readGate(t, s, "own-pause")
		until := t0.Add(30 * time.Second)
		if _, err := s.RecordResult(ctxT(t), "own-pause", policy.ReadResult{PausedUntil: until, Breaker: cacheBreaker}); err != nil {
			t.Fatal(err)
		}
		if g, cached := readGate(t, s, "own-pause"); cached || g.Gate.State != policy.GatePaused || !g.Gate.Until.Equal(until) {
			t.Fatalf("after its own pause = %+v cached %v", g, cached)
		}
		if g, cached := readGate(t, s, "own-pause"); !cached || g.Gate.State != policy.GatePaused {
			t.Fatalf("the pause again = %+v cached %v, want it from memory", g, cached)
		}
		e.Clk.Set(until)
		if g, cached := readGate(t, s, "own-pause"); cached || g.Gate.State != policy.GateOpen {
			t.Fatalf("at the pause's end = %+v cached %v, want open from Redis", g, cached)
		}

		readGate(t, s, "own-dis")
		if _, err := s.Disable(ctxT(t), "own-dis", "test"); err != nil {
			t.Fatal(err)
		}
		if g, cached := readGate(t, s, "own-dis"); cached || g.Gate.State != policy.GateDisabled {
			t.Fatalf("after its own disable = %+v cached %v", g, cached)
		}
		if g, cached := readGate(t, s, "own-dis"); !cached || g.Gate.State != policy.GateDisabled {
			t.Fatalf("disabled again = %+v cached %v, want it from memory", g, cached)
		}
	})
}

// TestGateCacheAdminActionsReachOtherReplicas: a disable, an enable and a
// breaker reset made through replica A reach replica B's cache by message.
func TestGateCacheAdminActionsReachOtherReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, b := watching(t, e.store()), watching(t, e.store())
		step := func(name string, act func() error, want policy.GateState) {
			t.Helper()
			readGate(t, b, "admin-api")
			if _, cached := readGate(t, b, "admin-api"); !cached {
				t.Fatalf("%s: B's gate is not cached before the action", name)
			}
			before := mark(b, "admin-api")
			if err := act(); err != nil {
				t.Fatal(err)
			}
			heard(t, b, "admin-api", "B hearing of "+name, before)
			if g, _ := readGate(t, b, "admin-api"); g.Gate.State != want {
				t.Fatalf("B after %s = %+v, want %s", name, g, want)
			}
		}
		step("disable", func() error { _, err := a.Disable(ctxT(t), "admin-api", "ops"); return err }, policy.GateDisabled)
		step("enable", func() error { return a.Enable(ctxT(t), "admin-api") }, policy.GateOpen)
		fail(t, a, "admin-api", 3)
		waitFor(t, "B hearing of the opening", func() bool {
			g, _ := readGate(t, b, "admin-api")
			return g.Gate.State == policy.GateBreakerOpen
		})
		step("reset", func() error { return a.ResetBreaker(ctxT(t), "admin-api") }, policy.GateOpen)
	})
}

// TestGateCacheRedisDown: when Redis stops answering, a cached gate is used
// at most MaxStale more; after that every read asks Redis and gets the
// error (the read path then passes reads without a key through, contract §4).
func TestGateCacheRedisDown(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	clk := clocktest.New(t0)
	s := manual(newReplica(rdb, clk, storetest.Rand(1)))
	readGate(t, s, "down-api")
	mr.Close()
	s.pollGates(ctxT(t)) // fails: keeps nothing
	if a, ok := s.CachedAdmission("down-api"); !ok || a.Gate.State != policy.GateOpen {
		t.Fatalf("within MaxStale of the last reading = %+v %v, want the cached open gate", a, ok)
	}
	clk.Advance(DefaultMaxStale + time.Millisecond)
	if _, ok := s.CachedAdmission("down-api"); ok {
		t.Fatal("a reading older than MaxStale was used while Redis is down")
	}
	if _, err := s.Admit(ctxT(t), "down-api", cacheBreaker); err == nil {
		t.Fatal("Admit with Redis down succeeded")
	}
}

// TestGateCacheIdleEndpointsDropped: an endpoint not read for Idle is no
// longer cached nor polled.
func TestGateCacheIdleEndpointsDropped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := manual(e.store())
		readGate(t, s, "idle-api")
		readGate(t, s, "busy-api")
		e.Clk.Advance(30 * time.Second)
		readGate(t, s, "busy-api")
		e.Clk.Advance(31 * time.Second)
		if got := s.cache.pollable(e.Clk.Now()); len(got) != 1 || got[0] != "busy-api" {
			t.Fatalf("pollable = %v, want only busy-api", got)
		}
		if _, ok := s.CachedAdmission("idle-api"); ok {
			t.Fatal("a dropped endpoint was answered from memory")
		}
	})
}
