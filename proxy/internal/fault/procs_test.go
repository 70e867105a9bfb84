//go:build fault

package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// startupTimeout bounds how long a process may take to come up.
const startupTimeout = 30 * time.Second

// redisServer is a durable redis-server of one test: append-only file
// fsynced on every write, in a directory of the test.
type redisServer struct {
	t    *testing.T
	port int
	dir  string
	proc *proctest.Process
	// Client is connected to it (go-redis reconnects after a restart).
	Client *redis.Client
}

// startRedis starts a redis-server with appendonly yes and appendfsync
// always on a free loopback port.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	r := &redisServer{t: t, port: proctest.FreePort(t), dir: t.TempDir()}
	r.start()
	r.Client = redis.NewClient(&redis.Options{Addr: r.Addr(), DisableIdentity: true})
	t.Cleanup(func() { _ = r.Client.Close() })
	return r
}

// Addr is host:port; URL the redis:// URL of the configuration.
func (r *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *redisServer) URL() string  { return "redis://" + r.Addr() + "/0" }

// start runs redis-server on the server's port and directory and waits
// until it answers PING.
func (r *redisServer) start() {
	r.t.Helper()
	args := []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no"}
	r.proc = proctest.Start(r.t, "redis", "redis-server", args, os.Environ(), nil)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	end := time.Now().Add(startupTimeout)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(end) {
			r.t.Fatalf("redis-server on %s did not answer PING:\n%s", r.Addr(), r.proc.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crash SIGKILLs redis-server; restart starts it again on the same port
// and data directory (it replays its append-only file).
func (r *redisServer) crash()   { r.proc.Kill() }
func (r *redisServer) restart() { r.start() }

// replica is one callout-proxy process.
type replica struct {
	*proctest.Process
	// URL and AdminURL are the base URLs of its two listeners.
	URL, AdminURL string
}

// startReplica writes yaml to a file and runs the binary on it with env,
// waiting until it logs its listening addresses. Its output is checked for
// panics when the test ends.
func startReplica(t *testing.T, name, yaml string, env map[string]string) *replica {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 1)
	onLine := func(line string) {
		var rec struct{ Msg, Listen, AdminListen string }
		var raw map[string]any
		if json.Unmarshal([]byte(line), &raw) != nil || raw["msg"] != "listening" {
			return
		}
		rec.Listen, _ = raw["listen"].(string)
		rec.AdminListen, _ = raw["admin_listen"].(string)
		select {
		case addrs <- [2]string{rec.Listen, rec.AdminListen}:
		default:
		}
	}
	p := proctest.Start(t, name, proxyBinary, []string{"--config", path}, envList(env), onLine)
	t.Cleanup(func() {
		if s := p.Tail(1 << 20); strings.Contains(s, "panic: ") || strings.Contains(s, "fatal error: ") {
			t.Errorf("replica %s panicked:\n%s", name, p.Tail(60))
		}
	})
	select {
	case a := <-addrs:
		return &replica{Process: p, URL: "http://" + a[0], AdminURL: "http://" + a[1]}
	case <-p.Exited():
		t.Fatalf("%s exited before listening:\n%s", name, p.Tail(40))
	case <-time.After(startupTimeout):
		t.Fatalf("%s did not log \"listening\" within %s:\n%s", name, startupTimeout, p.Tail(40))
	}
	return nil
}

// startReplicas starts n replicas r0, r1, … of yaml with env.
func startReplicas(t *testing.T, n int, yaml string, env map[string]string) []*replica {
	t.Helper()
	out := make([]*replica, n)
	for i := range out {
		out[i] = startReplica(t, fmt.Sprintf("r%d", i), yaml, env)
	}
	return out
}

// envList renders env as sorted KEY=value entries, with PATH.
func envList(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
