package proctest

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
)

// StartupTimeout bounds how long a process (redis-server, the proxy) may
// take to come up.
const StartupTimeout = 30 * time.Second

// Redis is a throwaway redis-server of one test, its own child process on a
// free loopback port with its data in a directory of the test — not the
// shared servers of redistest, which other packages' tests FLUSHALL.
type Redis struct {
	// Addr is host:port; URL the redis:// URL of a configuration's
	// redis.url.
	Addr, URL string
	// Client is connected to it (go-redis reconnects after a Restart).
	Client *redis.Client

	t       testing.TB
	port    int
	dir     string
	durable bool
	proc    *Process
}

// StartRedis starts redis-server (from PATH) and waits until it answers
// PING; it is stopped when the test ends. durable turns on the append-only
// file fsynced on every write (a Crash then loses nothing); otherwise
// nothing is persisted. Without redis-server the test is skipped, or fails
// under CALLOUT_TEST_REQUIRE_REAL=1.
func StartRedis(t testing.TB, durable bool) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(redistest.EnvRequireReal) == "1" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	r := &Redis{t: t, port: FreePort(t), dir: t.TempDir(), durable: durable}
	r.Addr = "127.0.0.1:" + strconv.Itoa(r.port)
	r.URL = "redis://" + r.Addr + "/0"
	r.start()
	r.Client = redis.NewClient(&redis.Options{Addr: r.Addr, DisableIdentity: true})
	t.Cleanup(func() { _ = r.Client.Close() })
	return r
}

// start runs redis-server on the port and directory and waits until it
// answers PING.
func (r *Redis) start() {
	r.t.Helper()
	args := []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--protected-mode", "no", "--appendonly", "no"}
	if r.durable {
		args = append(args[:len(args)-1], "yes", "--appendfsync", "always")
	}
	r.proc = Start(r.t, "redis-server", "redis-server", args, os.Environ(), nil)
	c := redis.NewClient(&redis.Options{Addr: r.Addr, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	end := time.Now().Add(StartupTimeout)
	for c.Ping(context.Background()).Err() != nil {
		select {
		case <-r.proc.Exited():
			r.t.Fatalf("redis-server on %s exited:\n%s", r.Addr, r.proc.Tail(20))
		default:
		}
		if time.Now().After(end) {
			r.t.Fatalf("redis-server on %s did not answer PING:\n%s", r.Addr, r.proc.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Crash SIGKILLs redis-server; Restart starts it again on the same port
// and data directory (a durable one replays its append-only file).
func (r *Redis) Crash()   { r.proc.Kill() }
func (r *Redis) Restart() { r.start() }

// SkipOnEmbeddedStore skips a multi-process test unless a real Redis is
// configured (CALLOUT_TEST_REDIS_URL set, or CALLOUT_TEST_REQUIRE_REAL=1 as
// .ci/test.sh sets): such tests, like proxy/internal/multiproc, belong to
// the real-Redis run, and `go test ./...` on the embedded store stays
// quick without them.
func SkipOnEmbeddedStore(t testing.TB) {
	t.Helper()
	if os.Getenv(redistest.EnvURL) == "" && os.Getenv(redistest.EnvRequireReal) != "1" {
		t.Skipf("a multi-process test: runs with a real Redis configured (%s, proxy/internal/redistest/start-redis.sh)",
			redistest.EnvURL)
	}
}
