package jobs

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
)

// t0 is a round Unix-ms instant on purpose: a Lua number like 1.7e12 must
// never reach Redis in exponent form.
var t0 = time.UnixMilli(1_700_000_000_000)

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
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			fn(t, &env{b: b, clk: clocktest.New(t0)})
		})
	}
}

// replays returns a new job Store (a "replica") on the backend with the
// env's clock (its scripts pinned to it) and its own deterministic random
// source, o's other options as given.
func (e *env) replays(o Options) *Store {
	e.seeds++
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], e.seeds)
	o.Now, o.Rand, o.PinScriptTime = e.clk.Now, rand.NewChaCha8(seed), true
	return New(e.b.Client, o)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantErr fails the test unless err matches target.
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// pttl returns a key's remaining TTL (-1: none, -2: no key).
func pttl(t *testing.T, e *env, key string) time.Duration {
	t.Helper()
	d, err := e.b.Client.PTTL(ctxT(t), key).Result()
	if err != nil {
		t.Fatalf("pttl %s: %v", key, err)
	}
	return d
}
