package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
)

// t0 is the instant the tests' clocks start at (storetest.T0).
var t0 = storetest.T0()

const jobLease = 10 * time.Second

// env is one backend under test with its clock.
type env struct {
	b     redistest.Backend
	clk   *clocktest.Clock
	seeds uint64
}

// forEachBackend runs fn as a subtest on every backend redistest offers.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	storetest.ForEachBackend(t, func(t *testing.T, b redistest.Backend, clk *clocktest.Clock) {
		fn(t, &env{b: b, clk: clk})
	})
}

// replays returns a new job Store (a "replica") on the backend with the
// env's clock (its scripts pinned to it) and its own deterministic random
// source, o's other options as given.
func (e *env) replays(o Options) *Store {
	e.seeds++
	o.Now, o.Rand, o.PinScriptTime = e.clk.Now, storetest.Rand(e.seeds), true
	return New(e.b.Client, o)
}

// ctxT is a test's context (storetest.Ctx).
func ctxT(t *testing.T) context.Context { return storetest.Ctx(t) }

// wantErr fails the test unless err matches target.
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	storetest.WantErr(t, err, target)
}

// pttl returns a key's remaining TTL (-1: none, -2: no key).
func pttl(t *testing.T, e *env, key string) time.Duration {
	t.Helper()
	return storetest.PTTL(t, e.b.Client, key)
}
