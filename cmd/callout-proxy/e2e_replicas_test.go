//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// buildProxy builds this command's binary into a temporary directory and
// returns its path. It needs the go tool on PATH.
func buildProxy(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the replica tests build the binary and need the go tool on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), "callout-proxy")
	cmd := exec.Command(gobin, "build", "-o", out, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// startReplica runs the binary bin as a separate process on config yaml
// with testEnv's environment, waits for its "listening" log line and
// returns it as a proxyUnderTest (URL, AdminURL, logs; its stop is not
// used). The process gets SIGTERM when the test ends and must exit 0.
func startReplica(t *testing.T, bin, yaml string) *proxyUnderTest {
	t.Helper()
	cmd := exec.Command(bin, "--config", writeConfig(t, yaml))
	for k, v := range testEnv() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proxyUnderTest{logs: &proctest.LogBuffer{}}
	addrs := make(chan [2]string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "listening" {
				addrs <- [2]string{rec["listen"].(string), rec["admin_listen"].(string)}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		<-scanned // Wait closes the pipe: read it all first
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { stopReplica(t, cmd, exited, p.logs) })
	select {
	case a := <-addrs:
		p.URL, p.AdminURL = "http://"+a[0], "http://"+a[1]
	case err := <-exited:
		t.Fatalf("replica exited before listening: %v\n%s", err, p.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("replica did not start listening:\n%s", p.logs)
	}
	return p
}

// stopReplica sends SIGTERM and waits up to 30 s for a clean exit, then
// kills the process.
func stopReplica(t *testing.T, cmd *exec.Cmd, exited chan error, logs *proctest.LogBuffer) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("replica exited with %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("replica did not stop within 30s after SIGTERM")
	}
}

// startRedis runs a throwaway redis-server (from PATH) on a free loopback
// port, without persistence, as this test's own child process — not the
// shared servers of CALLOUT_TEST_REDIS_URL, which other packages' tests
// FLUSHALL under a lock this package cannot take (it lives in
// proxy/internal) — and returns its redis:// URL. It is stopped when the
// test ends. Without redis-server the test is skipped, or fails under
// CALLOUT_TEST_REQUIRE_REAL=1.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CALLOUT_TEST_REQUIRE_REAL") == "1" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	port := proctest.FreePort(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir())
	var out proctest.LogBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); !redisPing(addr); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("redis-server exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer PING within 10s:\n%s", out.String())
		}
	}
	return "redis://" + addr + "/0"
}

// redisPing reports whether a Redis server at addr answers PING with +PONG.
func redisPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// timedUpstream is an upstream whose answer the test switches, recording
// when each request arrived and in which phase.
type timedUpstream struct {
	*upstream
	mu      sync.Mutex
	phase   string
	byPhase map[string][]time.Time // phase -> arrival times
	reply   map[string]func(w http.ResponseWriter)
}

// newTimedUpstream starts one with the given replies per phase; the first
// phase is start.
func newTimedUpstream(t *testing.T, start string, reply map[string]func(w http.ResponseWriter)) *timedUpstream {
	u := &timedUpstream{phase: start, byPhase: map[string][]time.Time{}, reply: reply}
	u.upstream = newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		u.mu.Lock()
		ph := u.phase
		u.byPhase[ph] = append(u.byPhase[ph], time.Now())
		u.mu.Unlock()
		u.reply[ph](w)
	})
	return u
}

// set switches the phase.
func (u *timedUpstream) set(phase string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.phase = phase
}

// arrivals is a copy of the arrival times of phase.
func (u *timedUpstream) arrivals(phase string) []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.byPhase[phase]...)
}

// answerStatus answers code at once.
func answerStatus(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

// rawGet sends GET url with the Authorization value and returns the status,
// the Callout-Outcome and problem type ("" for an upstream answer). It is
// safe to call from any goroutine (no t.Fatal).
func rawGet(url, authorization string) (status int, outcome, problemType string, err error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Authorization", authorization)
	resp, err := noRedirectClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", "", err
	}
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		var pb struct{ Type string }
		_ = json.Unmarshal(body, &pb)
		problemType = pb.Type
	}
	return resp.StatusCode, resp.Header.Get("Callout-Outcome"), problemType, nil
}

// untilTime sleeps until at (waiting for an interval to pass, not an
// assertion).
func untilTime(at time.Time) { time.Sleep(time.Until(at)) }
