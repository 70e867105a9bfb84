package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// buildCalloutctl builds this command into a temporary directory with the
// build stamps deploy/build.sh passes, and returns the binary's path.
func buildCalloutctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "calloutctl")
	cmd := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X main.version=v9.8.7 -X main.commit=0123456789abcdef0123 -X main.buildDate=2026-03-02T09:00:00Z", ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// binResult is one run of the built binary.
type binResult struct {
	stdout, stderr string
	code           int
}

// runBin runs bin with args and env (plus PATH), stdin empty.
func runBin(t *testing.T, bin string, env []string, args ...string) binResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return binResult{out.String(), errb.String(), code}
}

// TestTheBinary runs the real calloutctl binary against a real proxy: its
// build stamps, the server from either environment variable, a server
// that refuses connections, the callout listener given for the admin one,
// and Ctrl-C while it waits for a confirmation (exit 130, "interrupted").
func TestTheBinary(t *testing.T) {
	p := startProxy(t)
	d := p.seedDeadLetters(t, "pay-api", "pay", 1, time.Second)
	bin := buildCalloutctl(t)
	tok := envToken + "=" + opsToken

	r := runBin(t, bin, nil, "version")
	if r.code != 0 || !strings.Contains(r.stdout, "calloutctl v9.8.7 (commit 0123456789ab, built 2026-03-02T09:00:00Z, go1.") {
		t.Fatalf("version: %+v", r)
	}
	for _, env := range []string{envServer, envServerAlias} {
		r = runBin(t, bin, []string{tok, env + "=" + p.admin}, "dead-letters", "list")
		if r.code != 0 || !strings.Contains(r.stdout, d[0].id) {
			t.Fatalf("%s: %+v", env, r)
		}
	}

	r = runBin(t, bin, []string{tok, envServer + "=http://127.0.0.1:1"}, "dead-letters", "list")
	if r.code != exitError || !strings.Contains(r.stderr, "cannot reach the admin API at http://127.0.0.1:1") ||
		!strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stderr, "--server URL or CALLOUTCTL_SERVER=URL") {
		t.Fatalf("connection refused: %+v", r)
	}
	r = runBin(t, bin, []string{tok, envServer + "=" + p.callee}, "endpoints", "list")
	if r.code != exitError || !strings.Contains(r.stderr, p.callee+" is the callout listener, not admin_listen") {
		t.Fatalf("callout listener: %+v", r)
	}

	// Ctrl-C at the confirmation: stdin stays open, so it would wait forever.
	cmd := exec.Command(bin, "replay", "--endpoint", "pay-api")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), tok, envServer + "=" + p.admin}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var errb proctest.LogBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the question", func() bool { return strings.Contains(errb.String(), "[y/N]") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(errb.String(), "calloutctl: interrupted") {
		t.Fatalf("after Ctrl-C: %v\n%s", err, errb.String())
	}
}
