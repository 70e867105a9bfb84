//go:build hostile

package hostile

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
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
	// budget is the proxy's limits.max_inflight_bytes: the default.
	budget = 256 << 20
	// rssSlack is what the proxy's RSS may exceed the budget by.
	rssSlack = 150 << 20
)

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

// adminTokenFile writes a fresh admin token to a file in a temporary
// directory and returns the token and an admin section naming it, token
// ops of scope read (admin.tokens token_file).
func adminTokenFile(t *testing.T) (token, section string) {
	t.Helper()
	return adminTokenFileScope(t, "read")
}

// adminTokenFileScope is adminTokenFile with the token's scope (read or
// write).
func adminTokenFileScope(t *testing.T, scope string) (token, section string) {
	t.Helper()
	token = "hostile-admin-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	file := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return token, "admin:\n  tokens:\n    - {name: ops, token_file: " + file + ", scope: " + scope + "}\n"
}

// proxyOptions start the proxy with the suite's secret.
func proxyOptions() proctest.ProxyOptions {
	return proctest.ProxyOptions{Env: proctest.SecretEnv(testSecret, orgA, orgB, orgC)}
}

// bearer is an Authorization value with an HS256 token of iss valid for
// 30 minutes (the suite takes under 5).
func bearer(t *testing.T, iss string) string {
	return proctest.Bearer(t, proctest.IssuerSecret(testSecret, iss), iss, 30*time.Minute)
}

// dial connects to addr (a proxy listener) within 5 s and sets the
// connection's read and write deadline to d from now.
func dial(addr string, d time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(d))
	return c, nil
}
