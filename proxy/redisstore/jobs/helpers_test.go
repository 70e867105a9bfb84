package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
)

// t0 is the instant the tests' clocks start at (storetest.T0).
var t0 = storetest.T0()

const jobLease = 10 * time.Second

// env is one backend under test with its clock (storetest.Env), and this
// package's ways to build on it.
type env struct{ *storetest.Env }

// forEachBackend runs fn on every backend (storetest.ForEachBackend).
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	storetest.ForEachBackend(t, func(t *testing.T, se *storetest.Env) { fn(t, &env{se}) })
}

// replays returns a new job Store (a "replica") on the backend with the
// env's clock (its scripts pinned to it) and its own deterministic random
// source, o's other options as given.
func (e *env) replays(o Options) *Store {
	o.Now, o.Rand, o.PinScriptTime = e.Clk.Now, e.Rand(), true
	return New(e.B.Client, o)
}

// ctxT is a test's context (storetest.Ctx).
func ctxT(t *testing.T) context.Context { return storetest.Ctx(t) }
