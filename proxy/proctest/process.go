package proctest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a child process (the callout-proxy binary, a redis-server)
// whose combined stdout and stderr is collected line by line. Safe for
// concurrent use.
type Process struct {
	// Name names the process in failure output.
	Name string
	// Logs is its output so far, one line per line written.
	Logs   LogBuffer
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // what Wait returned; read after exited is closed
}

// Start runs path with args and env (nil: the command's default, the
// parent's environment), collecting its output; onLine, when not nil, sees
// every line as it is read. When the test ends the process is stopped
// (SIGTERM, then SIGKILL after 30 s) and, if the test failed, its last 40
// lines are logged.
func Start(t testing.TB, name, path string, args, env []string, onLine func(string)) *Process {
	t.Helper()
	p := &Process{Name: name, cmd: exec.Command(path, args...), exited: make(chan struct{})}
	p.cmd.Env = env
	out, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = p.cmd.Stderr // one pipe for both
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			_, _ = p.Logs.Write(append(sc.Bytes(), '\n'))
			if onLine != nil {
				onLine(sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, out) // a line over 1 MiB: keep the pipe drained
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Signal(syscall.SIGTERM, 30*time.Second)
		if t.Failed() {
			t.Logf("%s output (last 40 lines):\n%s", name, p.Tail(40))
		}
	})
	return p
}

// Signal sends sig and waits up to wait for the process to exit, then
// SIGKILLs it. It returns at once when the process has exited.
func (p *Process) Signal(sig syscall.Signal, wait time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Kill SIGKILLs the process, as a node failure or the OOM killer does, and
// waits for it to exit.
func (p *Process) Kill() { p.Signal(syscall.SIGKILL, 10*time.Second) }

// Exited is closed once the process has exited and its output is read.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is what waiting for the process returned (nil: exit status 0);
// call it after Exited is closed.
func (p *Process) ExitErr() error {
	<-p.exited
	return p.err
}

// Count is the number of output lines containing s.
func (p *Process) Count(s string) int {
	n := 0
	for line := range strings.SplitSeq(p.Logs.String(), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// Tail is the last n lines of output.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimSuffix(p.Logs.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// RSS is the process's resident set size in bytes (VmRSS of
// /proc/<pid>/status, Linux).
func (p *Process) RSS() (int64, error) {
	path := fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in %s", path)
}
