package k8scheck

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRedisConfigOnRealRedis runs the rendered init.sh of deploy/k8s/redis
// for pod 0 and pod 1 on a first start, and for pod 0 again when its
// Sentinel last knew pod 2 as the primary (every pod restarting at once,
// no Sentinel to ask: it must come back as pod 2's replica); then starts a
// real redis-server and a real Sentinel on the files it wrote (only the
// ports, the data directory and the cluster-DNS name of the primary
// changed for loopback), and asks them what they run with: AOF always,
// noeviction, the password required, and the Sentinel naming the primary.
func TestRedisConfigOnRealRedis(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (bash .ci/test.sh installs it)")
	}
	m, err := Render(overlayDir)
	if err != nil {
		t.Fatal(err)
	}
	var files map[string]string
	for _, cm := range m.ConfigMaps {
		if strings.HasPrefix(cm.Name, RedisName+"-config-") {
			files = cm.Data
		}
	}
	dir := t.TempDir()
	templates := filepath.Join(dir, "templates")
	if err := os.Mkdir(templates, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(templates, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const password = "0123456789abcdef0123456789abcdef"
	initPod := func(n int, state string) string {
		out := filepath.Join(dir, "pod"+strconv.Itoa(n))
		cmd := exec.Command("sh", filepath.Join(templates, "init.sh"))
		cmd.Env = append(os.Environ(), "HOSTNAME="+RedisName+"-"+strconv.Itoa(n), "POD_NAMESPACE=ns",
			"REDIS_PASSWORD="+password, "TEMPLATE_DIR="+templates, "OUT_DIR="+out, "STATE_DIR="+state)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("init.sh for pod %d: %v\n%s", n, err, b)
		}
		return out
	}
	primary := RedisName + "-0." + RedisName + ".ns.svc"
	state0, state1 := filepath.Join(dir, "data0"), filepath.Join(dir, "data1")
	pod0, pod1 := initPod(0, state0), initPod(1, state1)
	conf0, conf1 := readFile(t, pod0, "redis.conf"), readFile(t, pod1, "redis.conf")
	if d := RedisDirectives(conf0); d["replicaof"] != "" || d["replica-announce-ip"] != primary {
		t.Errorf("pod 0 (first start): replicaof %q, announces %q; want a primary announcing %s",
			d["replicaof"], d["replica-announce-ip"], primary)
	}
	if d := RedisDirectives(conf1); d["replicaof"] != primary+" 6379" {
		t.Errorf("pod 1: replicaof %q, want %s 6379", d["replicaof"], primary)
	}
	// A failover made pod 2 the primary (Sentinel rewrote its monitor
	// line), then every pod restarted: pod 0 comes back as pod 2's replica.
	pod2 := RedisName + "-2." + RedisName + ".ns.svc"
	restarted := filepath.Join(dir, "data0-restarted")
	if err := os.MkdirAll(restarted, 0o755); err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(readFile(t, state0, "sentinel.conf"), "callouts "+primary+" 6379", "callouts "+pod2+" 6379", 1)
	if err := os.WriteFile(filepath.Join(restarted, "sentinel.conf"), []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
	again := initPod(0, restarted)
	if d := RedisDirectives(readFile(t, again, "redis.conf")); d["replicaof"] != pod2+" 6379" {
		t.Errorf("pod 0 restarted after a failover to pod 2: replicaof %q, want %s 6379", d["replicaof"], pod2)
	}
	if m, _ := sentinelMonitor(readFile(t, restarted, "sentinel.conf")); m != "callouts" ||
		!strings.Contains(readFile(t, restarted, "sentinel.conf"), "sentinel monitor callouts "+pod2+" 6379 2") {
		t.Errorf("pod 0's Sentinel after the restart does not monitor pod 2:\n%s", readFile(t, restarted, "sentinel.conf"))
	}
	conf0 = readFile(t, initPod(0, state0), "redis.conf") // back to the first start's files for the run below

	redisPort, sentinelPort := freePort(t), freePort(t)
	redisConf := filepath.Join(pod0, "redis.conf")
	if err := os.WriteFile(redisConf, []byte(strings.Replace(conf0, "\ndir /data\n", "\ndir "+dir+"\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, server, redisConf, "--port", redisPort, "--bind", "127.0.0.1")
	cli := func(port string, args ...string) string {
		cmd := exec.Command("redis-cli", append([]string{"-p", port}, args...)...)
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
		b, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(b))
	}
	waitFor(t, func() bool { return cli(redisPort, "ping") == "PONG" })
	for key, want := range map[string]string{"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"} {
		if got := cli(redisPort, "--no-raw", "config", "get", key); !strings.Contains(got, `"`+want+`"`) {
			t.Errorf("CONFIG GET %s: %s, want %s", key, got, want)
		}
	}
	if got, _ := exec.Command("redis-cli", "-p", redisPort, "set", "k", "v").CombinedOutput(); !strings.Contains(string(got), "NOAUTH") {
		t.Errorf("an unauthenticated write answered %q, want NOAUTH", got)
	}

	sentinelConf := filepath.Join(state0, "sentinel.conf")
	text := strings.Replace(readFile(t, state0, "sentinel.conf"), primary+" 6379", "127.0.0.1 "+redisPort, 1)
	text = strings.Replace(text, "sentinel announce-ip "+primary, "sentinel announce-ip 127.0.0.1", 1)
	if err := os.WriteFile(sentinelConf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, server, sentinelConf, "--sentinel", "--port", sentinelPort, "--bind", "127.0.0.1")
	waitFor(t, func() bool { return cli(sentinelPort, "ping") == "PONG" })
	if got := cli(sentinelPort, "sentinel", "get-master-addr-by-name", "callouts"); got != "127.0.0.1\n"+redisPort {
		t.Errorf("the Sentinel names the primary %q, want 127.0.0.1 %s", got, redisPort)
	}
	if got, _ := exec.Command("redis-cli", "-p", sentinelPort, "sentinel", "masters").CombinedOutput(); !strings.Contains(string(got), "NOAUTH") {
		t.Errorf("an unauthenticated Sentinel command answered %q, want NOAUTH", got)
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// start runs redis-server with args until the test ends.
func start(t *testing.T, server string, args ...string) {
	t.Helper()
	cmd := exec.Command(server, args...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s %v:\n%s", server, args, log.String())
		}
	})
}

// waitFor polls ok until it holds, for up to 10 s (a start, not a timing
// assertion).
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for range 200 {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("redis-server did not answer PING within 10 s")
}
