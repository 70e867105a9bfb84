// Package redistest gives tests the Redis backends the store must work on:
// an embedded miniredis always, and a real single node and a real Redis
// Cluster when the environment names them (start them with start-redis.sh in
// this directory).
//
// Environment:
//
//	CALLOUT_TEST_REDIS_URL      redis:// URL of a real single node. Its
//	                            database is FLUSHALLed before every test.
//	CALLOUT_TEST_REDIS_CLUSTER  comma-separated host:port seeds of a real
//	                            Redis Cluster. Every master is FLUSHALLed
//	                            before every test.
//	CALLOUT_TEST_REQUIRE_REAL   "1": a missing real backend fails the test
//	                            instead of being skipped (CI sets it).
//
// Never point these at a Redis holding data you want to keep.
package redistest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Environment variables read by Backends.
const (
	EnvURL         = "CALLOUT_TEST_REDIS_URL"
	EnvCluster     = "CALLOUT_TEST_REDIS_CLUSTER"
	EnvRequireReal = "CALLOUT_TEST_REQUIRE_REAL"
)

// Backend is one Redis a test runs against.
type Backend struct {
	// Name is "miniredis", "single" or "cluster"; use it as the subtest name.
	Name string
	// Client talks to the backend; it is closed when the test ends.
	Client redis.UniversalClient
	// Mini is the embedded server (for FastForward and friends); nil for a
	// real backend.
	Mini *miniredis.Miniredis
}

// Real reports whether the backend is a real Redis server.
func (b Backend) Real() bool { return b.Mini == nil }

// Cluster reports whether the backend is a Redis Cluster.
func (b Backend) Cluster() bool { return b.Name == "cluster" }

// Now is the backend's clock, what TIME answers inside its scripts: the
// host's clock for miniredis (which answers TIME from it unless SetTime was
// called), the server's TIME for a real one (one node of a cluster).
func (b Backend) Now(t testing.TB) time.Time {
	t.Helper()
	if b.Mini != nil {
		return time.Now()
	}
	v, err := b.Client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Within fails the test unless got is within tol of want: for instants a
// script computed from TIME, which a test can only bound.
func Within(t testing.TB, what string, got, want time.Time, tol time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tol || d > tol {
		t.Fatalf("%s = %v, want %v ± %v (off by %v)", what, got, want, tol, d)
	}
}

// Backends returns a fresh miniredis plus, when configured, the real single
// node and the real cluster, each emptied with FLUSHALL. Without
// CALLOUT_TEST_REQUIRE_REAL=1 a missing real backend is logged and left
// out; with it, the test fails.
//
// Real backends are shared by every test process on the machine (go test
// runs packages in parallel), so Backends holds an exclusive lock file per
// real Redis until the test ends: tests that use real Redis run one at a
// time across processes (a process waits up to 5 minutes for another).
// Call it once per test: a second call while the same process holds the
// lock (nested in a subtest, or from t.Parallel tests) fails the test at
// once, because it would flush the data the first one is using.
func Backends(t testing.TB) []Backend {
	t.Helper()
	m := miniredis.RunT(t)
	mc := redis.NewClient(&redis.Options{Addr: m.Addr(), DisableIdentity: true})
	t.Cleanup(func() { _ = mc.Close() })
	out := []Backend{{Name: "miniredis", Client: mc, Mini: m}}

	url := os.Getenv(EnvURL)
	seeds := splitSeeds(os.Getenv(EnvCluster))
	if os.Getenv(EnvRequireReal) == "1" && (url == "" || len(seeds) == 0) {
		t.Fatalf("redistest: %s=1 but %s or %s is not set (run start-redis.sh)",
			EnvRequireReal, EnvURL, EnvCluster)
	}
	if url == "" || len(seeds) == 0 {
		t.Logf("redistest: real backends skipped (%s=%q, %s=%q)", EnvURL, url, EnvCluster, os.Getenv(EnvCluster))
	}
	if url != "" {
		out = append(out, single(t, url))
	}
	if len(seeds) > 0 {
		out = append(out, cluster(t, seeds))
	}
	return out
}

// ForEach runs fn as a subtest of t, named after the backend, on each of
// Backends (so the once-per-test rule of Backends holds for t).
func ForEach(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

// SingleOrMini is the one backend of Backends that a benchmark measures:
// the real single node when EnvURL names one, else miniredis (whose
// in-process server adds its own allocations and CPU). It calls Backends,
// so the same once-per-test rule holds.
func SingleOrMini(t testing.TB) Backend {
	t.Helper()
	bes := Backends(t)
	for _, b := range bes {
		if b.Name == "single" {
			return b
		}
	}
	return bes[0]
}

func splitSeeds(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func single(t testing.TB, url string) Backend {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redistest: %s: %v", EnvURL, err)
	}
	lock(t, "single "+url)
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("redistest: FLUSHALL on %s: %v", url, err)
	}
	return Backend{Name: "single", Client: c}
}

func cluster(t testing.TB, seeds []string) Backend {
	t.Helper()
	lock(t, "cluster "+strings.Join(seeds, ","))
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.FlushAll(ctx).Err()
	})
	if err != nil {
		t.Fatalf("redistest: FLUSHALL on cluster %v: %v", seeds, err)
	}
	return Backend{Name: "cluster", Client: c}
}
