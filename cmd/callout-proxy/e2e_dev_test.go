package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestDevCommand: `callout-proxy dev` with nothing set starts, prints a
// first curl that succeeds when sent as printed (and answers the same
// callout when sent again, by its Idempotency-Key), and CALLOUTCTL_*
// exports with which the calloutctl binary lists the demo endpoints.
func TestDevCommand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"dev", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"},
			func(string) string { return "" }, pw, io.Discard)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev returned %v", err)
		}
	})
	var banner strings.Builder
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && !strings.Contains(sc.Text(), "calloutctl endpoints list") {
		banner.WriteString(sc.Text() + "\n")
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	var curl string
	exports := map[string]string{}
	for _, line := range strings.Split(banner.String(), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "curl "):
			curl = line
		case strings.HasPrefix(line, "export CALLOUTCTL_"):
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			exports[k] = v
		}
	}
	if curl == "" || exports["CALLOUTCTL_SERVER"] == "" || exports["CALLOUTCTL_TOKEN"] == "" ||
		!strings.Contains(banner.String(), "/console/") {
		t.Fatalf("the banner lacks the curl, the console or the exports:\n%s", banner.String())
	}

	first := sendCurl(t, curl)
	if first.StatusCode != http.StatusOK || first.Header.Get("Callout-Outcome") != "success" {
		t.Fatalf("the printed curl: %d %s", first.StatusCode, first.Header.Get("Callout-Outcome"))
	}
	again := sendCurl(t, curl)
	if id := first.Header.Get("Callout-Id"); id == "" || again.Header.Get("Callout-Id") != id || again.StatusCode != 200 {
		t.Fatalf("sent again: %d, Callout-Id %q, want 200 and %q", again.StatusCode, again.Header.Get("Callout-Id"), id)
	}

	// The demo upstreams behave as the banner says: flaky fails twice then
	// recovers (an asynchronous write ends succeeded on its third attempt),
	// slow answers after ?delay.
	async := strings.Replace(strings.Replace(curl, "/callout/echo/charges", "/callout/flaky/charges", 1),
		"-H 'Idempotency-Key: "+devFirstKey+"'", "-H 'Idempotency-Key: flaky-1' -H 'Prefer: respond-async'", 1)
	accepted := sendCurl(t, async)
	id := accepted.Header.Get("Callout-Id")
	if accepted.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("a respond-async write to flaky: %d, Callout-Id %q", accepted.StatusCode, id)
	}
	var doc api.CalloutDoc
	for deadline := time.Now().Add(60 * time.Second); doc.State != policy.Succeeded; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the flaky callout did not succeed: %+v", doc.StatusDocument)
		}
		req, err := http.NewRequest(http.MethodGet, exports["CALLOUTCTL_SERVER"]+"/admin/v1/callouts/"+id, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+exports["CALLOUTCTL_TOKEN"])
		_, body := doRequest(t, req)
		doc = api.CalloutDoc{}
		_ = json.Unmarshal(body, &doc)
	}
	if n := len(doc.Attempts); n != devFlaky+1 {
		t.Fatalf("the flaky callout succeeded after %d attempts, want %d", n, devFlaky+1)
	}
	slow := strings.Replace(curl, "/callout/echo/charges", "/callout/slow/charges?delay=10ms", 1)
	slow = strings.Replace(slow, devFirstKey, "slow-1", 1)
	if r := sendCurl(t, slow); r.StatusCode != http.StatusOK || r.Header.Get("Callout-Outcome") != "success" {
		t.Fatalf("slow?delay=10ms: %d %s", r.StatusCode, r.Header.Get("Callout-Outcome"))
	}

	ctl := buildCalloutctl(t)
	cmd := exec.Command(ctl, "endpoints", "list")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"CALLOUTCTL_SERVER=" + exports["CALLOUTCTL_SERVER"], "CALLOUTCTL_TOKEN=" + exports["CALLOUTCTL_TOKEN"]}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("calloutctl endpoints list with the printed exports: %v\n%s", err, out)
	}
	for _, ep := range []string{"echo", "flaky", "slow"} {
		if !strings.Contains(string(out), ep) {
			t.Fatalf("calloutctl endpoints list lacks %s:\n%s", ep, out)
		}
	}
}

// TestDevPortTaken: a port already taken ends dev at once with a usage
// error (exit 2) naming the address and the flag that changes it.
func TestDevPortTaken(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = run(ctx, []string{"dev", "--listen", l.Addr().String(), "--admin-listen", "127.0.0.1:0"},
		func(string) string { return "" }, io.Discard, io.Discard)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), l.Addr().String()) ||
		!strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("dev on a taken port: %v (exit %d)", err, exitCode(err))
	}
}

// sendCurl sends the request of a printed curl line: -X METHOD, -H 'Name:
// value', --data 'body' and the URL, arguments in single quotes.
func sendCurl(t *testing.T, line string) *http.Response {
	t.Helper()
	args := shellWords(t, line)
	method, body, url := "GET", "", ""
	hdr := http.Header{}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "-si":
		case "-X":
			i++
			method = args[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(args[i], ":")
			hdr.Add(k, strings.TrimSpace(v))
		case "--data":
			i++
			body = args[i]
		default:
			url = args[i]
		}
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	resp, _ := doRequest(t, req)
	return resp
}

// shellWords splits a command line of bare words and single-quoted
// arguments, as the printed curl is written.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				t.Fatalf("unterminated quote in %q", s)
			}
			out = append(out, s[1:1+end])
			s = s[2+end:]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = rest
	}
	return out
}

// buildCalloutctl builds the calloutctl binary into the test's directory.
func buildCalloutctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "calloutctl")
	cmd := exec.Command(proctest.GoTool(), "build", "-o", bin, "./cmd/calloutctl")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/calloutctl: %v\n%s", err, out)
	}
	return bin
}
