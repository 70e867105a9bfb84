//go:build fault

package fault

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
