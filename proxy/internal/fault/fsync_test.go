//go:build fault

package fault

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestFsyncRefusedBeforeRedis72: durability fsync needs WAITAOF (Redis
// 7.2); on an older Redis the binary refuses to start and names the
// version it found (docs/configuration.md redis.durability). On 7.2 or
// later it starts.
func TestFsyncRefusedBeforeRedis72(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	info, err := rs.Client.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	if !strings.HasPrefix(version, "6.") && !strings.HasPrefix(version, "7.0.") && !strings.HasPrefix(version, "7.1.") {
		t.Skipf("Redis %s has WAITAOF; the refusal cannot be shown here", version)
	}
	up := proctest.NewUpstream(t, nil)
	cfg := strings.Replace(config(rs.URL, nil, endpoint("pay", up.URL)), "redis:\n", "redis:\n  durability: fsync\n", 1)
	if out := refusedStart(t, "fsync", cfg); !strings.Contains(out, "7.2 or later") || !strings.Contains(out, version) {
		t.Errorf("the refusal does not name the version %s:\n%s", version, out)
	}
}

// refusedStart runs the binary on configuration cfg, expects it to exit
// (a refusal at start) and returns the tail of its output.
func refusedStart(t *testing.T, name, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := proctest.Start(t, name, proxyBinary, []string{"--config", path}, proctest.EnvList(replicaEnv), nil)
	select {
	case <-p.Exited():
	case <-time.After(proctest.StartupTimeout):
		t.Fatalf("callout-proxy (%s) did not exit:\n%s", name, p.Tail(20))
	}
	return p.Tail(20)
}

// TestFsyncOnRedis72Delivers: on a Redis 7.2+ (or Valkey) with the
// append-only file, a proxy with durability fsync starts, answers keyed
// asynchronous writes 202 only after WAITAOF confirmed them (fewer
// WAITAOFs than writes: grouped) and delivers every one. Skipped unless
// CALLOUT_TEST_REDIS72_SERVER names such a server
// (proxy/internal/redistest/fetch-valkey.sh).
func TestFsyncOnRedis72Delivers(t *testing.T) {
	rs := proctest.StartRedis72(t, true)
	_, reps, c := payReplicas(t, rs, 1, nil, "  durability: fsync\n")
	before := commandCalls(rs.Addr, "waitaof")
	const n = 300
	acc, refused := c.postAsync(n, 16, "pay", "fsync", func(int) string { return reps[0].URL }, nil)
	if len(acc) != n || refused != 0 {
		t.Fatalf("%d of %d writes accepted, %d refused; want all accepted", len(acc), n, refused)
	}
	waits := commandCalls(rs.Addr, "waitaof") - before
	t.Logf("fsync: %d keyed writes accepted with %d WAITAOFs", n, waits)
	if waits < 1 || waits > n {
		t.Errorf("%d writes ran %d WAITAOFs, want 1 … %d", n, waits, n)
	}
	wantAll(t, c.waitFinal(t, reps[0].URL, acc, 60*time.Second), policy.Succeeded)
}
