// Package proctest is the process harness of the suites that run the real
// callout-proxy binary (fault, hostile, multiproc) and of the end-to-end
// tests of cmd/callout-proxy, cmd/calloutctl and the ops console: build the
// binary once, free loopback ports, and a log sink safe for concurrent
// writes that reads the proxy's JSON log lines back (the admin API's
// "audit" lines among them). It is imported by tests only; it is not under
// internal/ so that the tests of cmd/ can import it too.
package proctest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// MainPackage is the import path of the callout-proxy binary.
const MainPackage = "github.com/calloutproxy/callout-proxy/cmd/callout-proxy"

// GoTool is the go command: from PATH, else from $GOROOT or the toolchain's
// GOROOT.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	root := os.Getenv("GOROOT")
	if root == "" {
		root = runtime.GOROOT()
	}
	return filepath.Join(root, "bin", "go")
}

// EnvBinary names an environment variable holding the path of a
// callout-proxy binary built from this tree without -race (go build
// ./cmd/callout-proxy): BuildBinary returns it instead of linking another.
// .ci/test.sh builds one for all its suites.
const EnvBinary = "CALLOUT_PROXY_BINARY"

// BuildBinary builds MainPackage into dir/callout-proxy, with -race when
// race is true, and returns its path; without -race it returns EnvBinary's
// binary when that is set. It builds in the main module's root (found from
// this file's path), so a test of another module that imports this package
// (proxy/internal/realclients) builds the same binary. Errors carry the go
// command's output.
func BuildBinary(dir string, race bool) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" && !race {
		return p, nil
	}
	bin := filepath.Join(dir, "callout-proxy")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command(GoTool(), append(args, MainPackage)...)
	if _, file, _, ok := runtime.Caller(0); ok {
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", MainPackage, err, out)
	}
	return bin, nil
}

// RunWithBinary is a TestMain body: it builds the binary into a temporary
// directory (or uses the one the environment variable prebuilt names, when
// set), stores its path in *bin, runs the tests and removes what it built.
// suite prefixes its error messages. It returns the exit code.
func RunWithBinary(m *testing.M, suite, prebuilt string, race bool, bin *string) int {
	if p := os.Getenv(prebuilt); prebuilt != "" && p != "" {
		*bin = p
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "callout-proxy-"+suite+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, suite+":", err)
		return 1
	}
	defer os.RemoveAll(dir)
	p, err := BuildBinary(dir, race)
	if err != nil {
		fmt.Fprintln(os.Stderr, suite+":", err)
		return 1
	}
	*bin = p
	return m.Run()
}

// RunSuite is the TestMain body of a suite that runs the binary (without
// -race: the race detector's cost would distort the load and the memory
// such a suite measures) on redis-servers of its own, as fault and hostile
// do: it fails at once without redis-server on PATH, then runs
// RunWithBinary.
func RunSuite(m *testing.M, suite, prebuilt string, bin *string) int {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, suite+": redis-server is required:", err)
		return 1
	}
	return RunWithBinary(m, suite, prebuilt, false, bin)
}

// FreePort returns a loopback TCP port nothing listens on (it was free a
// moment ago and is closed again), for a server the test starts on it.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// Eventually calls cond every every until it holds, failing the test
// with what once within has passed first. It waits for something another
// goroutine or process brings about (a request reaching an upstream, a
// job finishing), never for time itself to pass.
func Eventually(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting: %s", within, what)
		}
		time.Sleep(every)
	}
}

// ClosedPort returns a loopback TCP port that refuses connections for the
// rest of the test: a socket bound to it but never listening holds it, so
// no other listener of parallel tests (a proxy or server on port 0) can
// take it meanwhile, and a connect gets a reset (connection refused).
// FreePort is for a port to listen on; this is for an upstream that is
// down.
func ClosedPort(t testing.TB) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

// LogBuffer collects JSON log lines (an slog JSON handler's or a process's
// stderr). Safe for concurrent use; the zero value is ready.
type LogBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every Write
}

// Write appends p and wakes WaitFor.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
	}
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

// WaitFor waits until what was written contains s, woken by each Write; it
// fails the test if it does not within timeout.
func (b *LogBuffer) WaitFor(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		b.mu.Lock()
		found := strings.Contains(b.buf.String(), s)
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("logs do not contain %q after %s:\n%s", s, timeout, b.String())
		}
	}
}

// String is everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Count is how many times s occurs in what was written so far.
func (b *LogBuffer) Count(s string) int { return strings.Count(b.String(), s) }

// Records returns the decoded lines whose msg is msg; lines that are not
// JSON objects are skipped.
func (b *LogBuffer) Records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		var m map[string]any
		if line != "" && json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// MustRecords is Records, failing the test on a line that is not a JSON
// object (for a logger that must write nothing else); blank lines are
// skipped.
func (b *LogBuffer) MustRecords(t testing.TB, msg string) []map[string]any {
	t.Helper()
	b.Lines(t)
	return b.Records(msg)
}

// Lines returns every line written so far, decoded, failing the test on a
// line that is not a JSON object; blank lines are skipped.
func (b *LogBuffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// Reset forgets what was written so far.
func (b *LogBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// Audits returns the decoded "audit" lines of the admin API.
func (b *LogBuffer) Audits() []map[string]any { return b.Records("audit") }

// auditResult is the form of every audit line's result: the contract's
// vocabulary, lower-case words joined by underscores (docs/contract.md §12).
var auditResult = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

// CheckAuditResults registers a check, run when t ends, that every audit
// line written to b by then has a result in the contract's vocabulary
// (docs/contract.md §12: not_found, never not-found; auth.AuditResult).
func (b *LogBuffer) CheckAuditResults(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		for _, m := range b.Audits() {
			if r, _ := m["result"].(string); !auditResult.MatchString(r) {
				t.Errorf("audit line %v: result %q is not lower-case words joined by underscores (contract §12)", m, r)
			}
		}
	})
}

// HasAudit reports whether an audit line has every key=value of want
// (string values).
func (b *LogBuffer) HasAudit(want map[string]string) bool {
	for _, m := range b.Audits() {
		ok := true
		for k, v := range want {
			if s, _ := m[k].(string); s != v {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Bearer is an Authorization value for a caller of org iss: "Bearer " and
// an HS256 token signed with secret for the audience callout-proxy, user
// 005000000000001AAA, valid for ttl from now (the configurations' auth
// section, contract §4's caller JWT).
func Bearer(t testing.TB, secret, iss string, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.MintHS256([]byte(secret), iss, "callout-proxy", "005000000000001AAA", ttl, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}
