package proctest

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	bin     string   // the server binary: redis-server, or EnvServer72's
	extra   []string // more redis-server arguments
	proc    *Process
}

// EnvServer72 names an environment variable holding the path of a server
// of Redis 7.2 or later (or Valkey) for the tests of what needs one
// (WAITAOF, durability fsync: StartRedis72). Unset: those tests are
// skipped.
const EnvServer72 = "CALLOUT_TEST_REDIS72_SERVER"

// StartRedis starts redis-server (from PATH) and waits until it answers
// PING; it is stopped when the test ends. durable turns on the append-only
// file fsynced on every write (a Crash then loses nothing); otherwise
// nothing is persisted. Without redis-server the test is skipped, or fails
// under CALLOUT_TEST_REQUIRE_REAL=1.
func StartRedis(t testing.TB, durable bool) *Redis {
	t.Helper()
	return startRedis(t, "redis-server", durable)
}

// StartRedis72 is StartRedis on the server EnvServer72 names (Redis 7.2
// or later, or Valkey); without it the test is skipped.
func StartRedis72(t testing.TB, durable bool) *Redis {
	t.Helper()
	bin := os.Getenv(EnvServer72)
	if bin == "" {
		t.Skipf("%s is not set: no Redis 7.2+ or Valkey to test with (docs/operating.md \"Durability\")", EnvServer72)
	}
	return startRedis(t, bin, durable)
}

// StartReplica starts a redis-server replicating from primary (same
// binary) and returns once its replication link is up.
func StartReplica(t testing.TB, primary *Redis) *Redis {
	t.Helper()
	host, port, _ := strings.Cut(primary.Addr, ":")
	r := startRedis(t, primary.bin, primary.durable, "--replicaof", host, port)
	r.waitLinkUp()
	return r
}

// startRedis starts bin on a free port (skipped, or failed under
// CALLOUT_TEST_REQUIRE_REAL=1, when it is not found) with extra arguments.
func startRedis(t testing.TB, bin string, durable bool, extra ...string) *Redis {
	t.Helper()
	return startRedisOn(t, bin, durable, FreePort(t), extra...)
}

// startRedisOn is startRedis on port.
func startRedisOn(t testing.TB, bin string, durable bool, port int, extra ...string) *Redis {
	t.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		if os.Getenv(redistest.EnvRequireReal) == "1" {
			t.Fatalf("%s not found: %v", bin, err)
		}
		t.Skipf("%s not found: %v", bin, err)
	}
	r := &Redis{t: t, port: port, dir: t.TempDir(), durable: durable, bin: bin, extra: extra}
	r.Addr = "127.0.0.1:" + strconv.Itoa(r.port)
	r.URL = "redis://" + r.Addr + "/0"
	r.start()
	r.Client = redis.NewClient(&redis.Options{Addr: r.Addr, DisableIdentity: true})
	t.Cleanup(func() { _ = r.Client.Close() })
	return r
}

// waitLinkUp waits until this replica's link to its primary is up (INFO
// replication master_link_status:up).
func (r *Redis) waitLinkUp() {
	r.t.Helper()
	r.WaitInfo("replication", "master_link_status:up")
}

// WaitInfo waits until INFO section (e.g. "replication") contains want
// (e.g. "role:master"), for StartupTimeout; then the test fails.
func (r *Redis) WaitInfo(section, want string) {
	r.t.Helper()
	r.await("INFO "+section+" "+want, func(ctx context.Context) (string, bool) {
		v, err := r.Client.Info(ctx, section).Result()
		return v, err == nil && strings.Contains(v, want)
	})
}

// await polls ready until it reports true, for StartupTimeout; then the
// test fails with what, ready's last answer and the server's log tail.
func (r *Redis) await(what string, ready func(ctx context.Context) (string, bool)) {
	r.t.Helper()
	end := time.Now().Add(StartupTimeout)
	for {
		v, ok := ready(context.Background())
		if ok {
			return
		}
		if time.Now().After(end) {
			r.t.Fatalf("redis-server %s: waited for %s in vain; last answer:\n%s\n%s", r.Addr, what, v, r.proc.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start runs redis-server on the port and directory and waits until it
// answers PING.
func (r *Redis) start() {
	r.t.Helper()
	args := []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--protected-mode", "no", "--repl-diskless-sync-delay", "0", "--appendonly", "no"}
	if r.durable {
		args = append(args[:len(args)-1], "yes", "--appendfsync", "always")
	}
	args = append(args, r.extra...)
	r.proc = Start(r.t, "redis-server", r.bin, args, os.Environ(), nil)
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
