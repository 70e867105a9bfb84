package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/inspect"
	pend "github.com/calloutproxy/callout-proxy/proxy/redisstore/pending"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// t0 is the instant the tests' clocks start at (storetest.T0).
var t0 = storetest.T0()

const (
	testLease = storetest.Lease
	day       = storetest.Day
)

// env is one backend under test with its clock.
type env struct {
	b     redistest.Backend
	clk   *clocktest.Clock
	seeds atomic.Uint64
}

// store returns a new Store (a "replica") on the backend with its own
// deterministic random source.
func (e *env) store() *Store { return e.storeWith(func(*Options) {}) }

// storeWith is store() with change made to the tests' options first.
func (e *env) storeWith(change func(o *Options)) *Store {
	o := Options{
		PinScriptTime: true, Now: e.clk.Now, Rand: storetest.Rand(e.seeds.Add(1)), ResponseBodyCap: 16,
		IdempotencyRetention: day, DeadLetterRetention: 30 * day,
	}
	change(&o)
	return New(e.b.Client, o)
}

// forEachBackend runs fn as a subtest on every backend redistest offers.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	storetest.ForEachBackend(t, func(t *testing.T, se *storetest.Env) {
		fn(t, &env{b: se.B, clk: se.Clk})
	})
}

// ctxB and ctxT are a test's context (storetest.Ctx).
func ctxB(t testing.TB) context.Context { return storetest.Ctx(t) }

func ctxT(t *testing.T) context.Context { return storetest.Ctx(t) }

// orgQueue is q's organisation queue of req's issuer (its due and lease
// sets), with no breaker partition.
func orgQueue(q queue) queue {
	return q.ForOrg(keyspace.IssuerTag(storetest.Issuer), "")
}

// req returns a new callout of endpoint with an idempotency key
// (storetest.Req).
func req(endpoint, key string, body string) policy.NewCallout {
	return storetest.Req(endpoint, key, body)
}

var (
	claimOpts = ClaimOptions{Batch: 10, Lease: testLease}
	enqOpts   = policy.EnqueueOptions{}
)

// failure is a retryable attempt that counts toward the breaker
// (storetest.Failure).
func failure(next time.Time) policy.Completion { return storetest.Failure(next) }

// success is a 2xx attempt that ends the callout (storetest.Success).
func success() policy.Completion { return storetest.Success() }

// mustEnqueue enqueues n callouts due now and returns their ids
// (storetest.MustEnqueue).
func mustEnqueue(t *testing.T, s *Store, endpoint string, n int) []string {
	t.Helper()
	return storetest.MustEnqueue(t, s, endpoint, n)
}

// mustClaim claims and fails the test on error (storetest.MustClaim).
func mustClaim(t *testing.T, s *Store, endpoint string, opts ClaimOptions) ClaimResult {
	t.Helper()
	return storetest.MustClaim(t, s, endpoint, opts)
}

// mustComplete completes and fails the test on error
// (storetest.MustComplete).
func mustComplete(t *testing.T, s *Store, c *policy.Claimed, comp policy.Completion) policy.CompleteResult {
	t.Helper()
	return storetest.MustComplete(t, s, c, comp)
}

// mustGet gets a callout and fails the test on error.
func mustGet(t *testing.T, s *Store, id string) *policy.Callout {
	t.Helper()
	c, err := s.Get(ctxT(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return c
}

// mustState reads an endpoint's state.
func mustState(t *testing.T, s *Store, endpoint string) policy.EndpointState {
	t.Helper()
	st, err := s.EndpointState(ctxT(t), endpoint)
	if err != nil {
		t.Fatalf("endpoint state %s: %v", endpoint, err)
	}
	return st
}

// openBreaker drives n counting failures through endpoint and returns the
// result of the last.
func openBreaker(t *testing.T, e *env, s *Store, endpoint string, n int) policy.CompleteResult {
	t.Helper()
	var last policy.CompleteResult
	for i := range n {
		mustEnqueue(t, s, endpoint, 1)
		cl := mustClaim(t, s, endpoint, ClaimOptions{Batch: 1, Lease: testLease})
		if len(cl.Claimed) != 1 {
			t.Fatalf("failure %d: claimed %d (gate %+v)", i, len(cl.Claimed), cl.Gate)
		}
		last = mustComplete(t, s, cl.Claimed[0], failure(e.clk.Now().Add(time.Hour)))
	}
	return last
}

// concurrently runs do(0) … do(n-1) at once and returns their results in
// order; an error fails the test (t.Error) and leaves its result as do
// returned it.
func concurrently[R any](t *testing.T, n int, do func(i int) (R, error)) []R {
	t.Helper()
	results := make([]R, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := do(i)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		})
	}
	wg.Wait()
	return results
}

// wantErr fails the test unless err matches target (storetest.WantErr).
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	storetest.WantErr(t, err, target)
}

// pttl returns a key's remaining TTL (-1: none, -2: no key).
func pttl(t *testing.T, e *env, key string) time.Duration {
	t.Helper()
	return storetest.PTTL(t, e.b.Client, key)
}

// recordKey is the record key of callout id (keyspace).
func recordKey(id string) string {
	k, _ := keyspace.Callout(id)
	return k
}

// recordKeys are the keys of callout id: its record, :q and :r.
func recordKeys(id string) []string {
	k := recordKey(id)
	return []string{k, k + ":q", k + ":r"}
}

// mustDeadLetter completes the claimed callout c as dead-lettered for
// reason and fails the test on an error.
func mustDeadLetter(t *testing.T, s *Store, c *policy.Claimed, reason policy.DeadLetterReason) policy.CompleteResult {
	t.Helper()
	comp := failure(time.Time{})
	comp.Action, comp.Reason = policy.ActionDeadLetter, reason
	return mustComplete(t, s, c, comp)
}

// deadLettersOf returns the dead-letter reader of s's Redis, wired as the
// composition root wires it (proxy/app).
func deadLettersOf(s *Store) *deadletters.Store {
	return deadletters.New(s.rdb, s, deadletters.Options{Now: s.now, PinScriptTime: s.pin})
}

// pendingOf returns the pending-callout reader of s's Redis, wired as the
// composition root wires it (proxy/app).
func pendingOf(s *Store) *pend.Reader { return pend.New(s.rdb, s) }

// inspectOf returns the callout reader of s's Redis (proxy/redisstore/inspect).
func inspectOf(s *Store) *inspect.Reader { return inspect.New(s.rdb, s) }
