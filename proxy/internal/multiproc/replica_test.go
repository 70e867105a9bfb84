package multiproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// replica is one callout-proxy process of a test.
type replica struct {
	// Name is the replica's name in the test, also its REPLICA variable
	// (the value its endpoints inject as X-Replica).
	Name string
	// URL and AdminURL are the base URLs of its two listeners.
	URL      string
	AdminURL string

	cmd    *exec.Cmd
	logs   *logLines
	exited chan struct{} // closed once the process was reaped
	err    error         // what Wait returned; read after exited closes
}

// logLines collects a replica's stderr (JSON log lines, and whatever the
// Go runtime or the race detector prints).
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startupTimeout bounds how long a replica may take to log "listening".
const startupTimeout = 30 * time.Second

// startReplica writes yaml to a config file and runs the binary on it with
// exactly env as its environment, waiting until it logs its listening
// addresses. When the test ends the process gets SIGTERM (SIGKILL if it
// has not exited 15 s later) and its stderr is checked for data races and
// panics.
func startReplica(t *testing.T, name, yaml string, env map[string]string) *replica {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(proxyBinary, "--config", path)
	cmd.Env = envList(env)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	r := &replica{Name: name, cmd: cmd, logs: &logLines{}, exited: make(chan struct{})}
	addrs := make(chan [2]string, 1)
	go r.readLogs(stderr, addrs)
	t.Cleanup(func() { r.stop(t) })
	select {
	case a := <-addrs:
		r.URL, r.AdminURL = "http://"+a[0], "http://"+a[1]
	case <-r.exited:
		t.Fatalf("%s exited before listening (%v):\n%s", name, r.err, r.logs)
	case <-time.After(startupTimeout):
		t.Fatalf("%s did not log \"listening\" within %s:\n%s", name, startupTimeout, r.logs)
	}
	return r
}

// readLogs copies the process's stderr line by line into r.logs, sends
// the addresses of the "listening" line on addrs, and reaps the process
// once stderr is closed.
func (r *replica) readLogs(stderr io.Reader, addrs chan<- [2]string) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		r.logs.add(line)
		var rec struct {
			Msg         string `json:"msg"`
			Listen      string `json:"listen"`
			AdminListen string `json:"admin_listen"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
			select {
			case addrs <- [2]string{rec.Listen, rec.AdminListen}:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, stderr) // a line over 1 MiB: keep the pipe drained
	r.err = r.cmd.Wait()
	close(r.exited)
}

// kill sends SIGKILL, as a node failure or the OOM killer does, and waits
// until the process is gone.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL %s: %v", r.Name, err)
	}
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10 s after SIGKILL", r.Name)
	}
}

// stop ends the process (SIGTERM, then SIGKILL after 15 s) unless it has
// exited already, and fails the test when its stderr shows a data race or
// a panic. On a failed test it logs the replica's stderr.
func (r *replica) stop(t *testing.T) {
	select {
	case <-r.exited:
	default:
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Signal(syscall.SIGKILL)
			<-r.exited
		}
	}
	logs := r.logs.String()
	for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
		if strings.Contains(logs, bad) {
			t.Errorf("replica %s printed %q", r.Name, bad)
		}
	}
	if t.Failed() {
		t.Logf("replica %s exited (%v); stderr:\n%s", r.Name, r.err, logs)
	}
}

// envList renders env as KEY=value entries, sorted for reproducibility.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// startReplicas starts n replicas of yaml named r0, r1, …, each with its
// own REPLICA variable, and returns them in order.
func startReplicas(t *testing.T, n int, yaml string) []*replica {
	t.Helper()
	out := make([]*replica, n)
	for i := range out {
		name := fmt.Sprintf("r%d", i)
		out[i] = startReplica(t, name, yaml, replicaEnv(name))
	}
	return out
}
