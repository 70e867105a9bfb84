// Package storetest is what the store's test packages share: every backend
// under test with an injected clock, a test's deadline context, seeded
// random sources and the small assertions on errors and TTLs. Only tests
// import it.
package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// T0 is the instant the tests' clocks start at: a round Unix-ms instant on
// purpose, since a Lua number like 1.7e12 must never reach Redis in
// exponent form.
func T0() time.Time { return time.UnixMilli(1_700_000_000_000) }

// Env is one backend under test with its clock.
type Env struct {
	// B is the backend (miniredis, a real node or a real cluster).
	B redistest.Backend
	// Clk is the test's clock, at T0 to begin with.
	Clk   *clocktest.Clock
	seeds atomic.Uint64
}

// Rand is a new deterministic random source for a replica on e: the first
// is Rand(1), each later one the next seed.
func (e *Env) Rand() *rand.ChaCha8 { return Rand(e.seeds.Add(1)) }

// PTTL is key's remaining TTL on e's backend (PTTL).
func (e *Env) PTTL(t testing.TB, key string) time.Duration {
	t.Helper()
	return PTTL(t, e.B.Client, key)
}

// ForEachBackend runs fn as a subtest on every backend redistest offers,
// each with a fresh Env (its clock at T0).
func ForEachBackend(t *testing.T, fn func(t *testing.T, e *Env)) {
	t.Helper()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, &Env{B: b, Clk: clocktest.New(T0())}) })
	}
}

// Ctx is a context that ends 30 s from now or when the test ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Rand is the deterministic random source of seed n (a replica's own:
// one n a replica).
func Rand(n uint64) *rand.ChaCha8 {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], n)
	return rand.NewChaCha8(seed)
}

// WantErr fails the test unless err matches target (errors.Is).
func WantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// PTTL is key's remaining TTL in rdb (-1 ns: none, -2 ns: no key).
func PTTL(t testing.TB, rdb redis.UniversalClient, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(Ctx(t), key).Result()
	if err != nil {
		t.Fatalf("pttl %s: %v", key, err)
	}
	return d
}
