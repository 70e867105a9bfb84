//go:build hostile

package hostile

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

const (
	testSecret = "hostile-suite-secret-of-at-least-32-bytes"
	// orgA floods; orgB is the healthy second org the monitor speaks for.
	orgA = "https://flood.my.salesforce.com"
	orgB = "https://healthy.my.salesforce.com"
	// startupTimeout bounds how long a process may take to come up.
	startupTimeout = 30 * time.Second
	// budget is the proxy's limits.max_inflight_bytes: the default.
	budget = 256 << 20
	// rssSlack is what the proxy's RSS may exceed the budget by.
	rssSlack = 150 << 20
)

// startRedis starts a redis-server on a free loopback port (no
// persistence: the suite measures memory, not durability) and returns a
// client of it.
func startRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	port := proctest.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	proctest.Start(t, "redis-server", "redis-server", []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(),
		"--save", "", "--appendonly", "no", "--protected-mode", "no"}, os.Environ(), nil)
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	end := time.Now().Add(startupTimeout)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(end) {
			t.Fatalf("redis-server on %s did not answer PING", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, "redis://" + addr + "/0"
}

// redisBytes is what every key of Redis takes, in bytes: the sum of
// MEMORY USAGE (SAMPLES 0: every element counted) over a SCAN of the
// keyspace — what the proxy stored, without client buffers (a 12 MiB
// argument sits in a query buffer for a while) or allocator slack.
func redisBytes(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	ctx := context.Background()
	var total int64
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := c.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		total += n
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// proxyProc is the callout-proxy under attack.
type proxyProc struct {
	*proctest.Process
	URL, AdminURL string
	addr          string // host:port of the callout listener
}

// startProxy writes yaml to a file and runs the binary on it, waiting for
// its "listening" line.
func startProxy(t *testing.T, yaml string) *proxyProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hostile.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 1)
	onLine := func(line string) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "listening" {
			return
		}
		l, _ := rec["listen"].(string)
		a, _ := rec["admin_listen"].(string)
		select {
		case addrs <- [2]string{l, a}:
		default:
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "TEST_JWT_SECRET=" + testSecret}
	p := proctest.Start(t, "callout-proxy", proxyBinary, []string{"--config", path}, env, onLine)
	t.Cleanup(func() {
		if s := p.Tail(1 << 20); strings.Contains(s, "panic: ") || strings.Contains(s, "fatal error: ") {
			t.Errorf("the proxy panicked:\n%s", p.Tail(60))
		}
	})
	select {
	case a := <-addrs:
		return &proxyProc{Process: p, URL: "http://" + a[0], AdminURL: "http://" + a[1], addr: a[0]}
	case <-p.Exited():
		t.Fatalf("the proxy exited before listening:\n%s", p.Tail(40))
	case <-time.After(startupTimeout):
		t.Fatalf("the proxy did not listen within %s:\n%s", startupTimeout, p.Tail(40))
	}
	return nil
}

// bearer is an Authorization value with an HS256 token of iss valid for
// 30 minutes (the suite takes under 5).
func bearer(t *testing.T, iss string) string {
	return proctest.Bearer(t, testSecret, iss, 30*time.Minute)
}

// metric is the value of an unlabelled or fully labelled sample line of
// the proxy's /metrics ("name" or `name{l="v"}`), or -1.
func (p *proxyProc) metric(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get(p.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return f
		}
	}
	return -1
}
