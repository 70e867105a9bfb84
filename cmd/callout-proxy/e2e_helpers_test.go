package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// loopbackNets lets an endpoint reach the httptest upstreams on 127.0.0.1.
const loopbackNets = proctest.Loopback

// singleTenant is the endpoint setting of one breaker for the whole
// endpoint (breaker.partition endpoint, contract §6), for the tests of the
// endpoint breaker's own states; the default partitions it by organisation.
const singleTenant = "breaker: {partition: endpoint}"

// pathStatus is NNN of a request to /status/NNN; on any other path it
// answers 418 and reports false.
func pathStatus(w http.ResponseWriter, r *http.Request) (int, bool) {
	code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
	if err != nil {
		http.Error(w, "bad test path", http.StatusTeapot)
		return 0, false
	}
	return code, true
}

// statusHandler answers /status/NNN with status NNN, a text body naming it
// and a marker header; redirects carry a Location, 429 a Retry-After.
func statusHandler(w http.ResponseWriter, r *http.Request) {
	code, ok := pathStatus(w, r)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Upstream-Status", strconv.Itoa(code))
	switch code {
	case http.StatusMovedPermanently, http.StatusFound:
		h.Set("Location", "/moved/elsewhere")
	case http.StatusTooManyRequests:
		h.Set("Retry-After", "7")
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, "upstream says %d", code)
}

// bareStatusHandler answers /status/NNN with status NNN and nothing else:
// unlike statusHandler, its 429 carries no Retry-After, so it pauses
// nothing and only the breaker rule is exercised.
func bareStatusHandler(w http.ResponseWriter, r *http.Request) {
	code, ok := pathStatus(w, r)
	if !ok {
		return
	}
	w.WriteHeader(code)
}

// failHandler answers /fail with 503 and any other path with 200.
func failHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/fail" {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// okHandler answers 200 with a small text body.
func okHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "upstream ok")
}

// withPolicy appends a policy section with lines ("key: value") to cfg.
func withPolicy(cfg string, lines ...string) string {
	cfg += "policy:\n"
	for _, l := range lines {
		cfg += "  " + l + "\n"
	}
	return cfg
}

// envWith is testEnv plus key, value pairs.
func envWith(kv ...string) map[string]string {
	env := testEnv()
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// writeConfig writes yaml to a new config file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noAuth is a header for call that sends no Authorization at all.
func noAuth() http.Header { return http.Header{"Authorization": nil} }

// authHeader is a header for call with the given Authorization value.
func authHeader(v string) http.Header { return http.Header{"Authorization": {v}} }

// raw sends head (request line and header fields, each line ending in
// "\r\n", without the blank line) and body over a new TCP connection to
// the proxy's callout listener, exactly as written, and reads one response.
// It is for requests net/http would not send as they are: absolute-form
// targets, CONNECT, a backslash in the path, repeated Connection fields.
func (p *proxyUnderTest) raw(t *testing.T, head string, body []byte) (*http.Response, []byte) {
	t.Helper()
	conn := p.dial(t)
	defer conn.Close()
	if _, err := conn.Write(append([]byte(head+"\r\n"), body...)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	return resp, proctest.ReadBody(t, resp)
}

// dial opens a TCP connection to the proxy's callout listener, failing the
// test when it cannot, with a deadline 20 s away for everything sent and
// read on it. The caller closes it.
func (p *proxyUnderTest) dial(t *testing.T) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return conn
}

// wantProblem asserts a proxy-made error (contract §2) with
// proctest.WantProblem and returns the decoded body.
func wantProblem(t *testing.T, resp *http.Response, body []byte, status int, code problem.Code,
	out policy.Outcome) problem.Body {
	t.Helper()
	return proctest.WantProblem(t, resp.StatusCode, resp.Header, body, status, code, out)
}

// wantUpstream asserts an upstream answer passed through: the status, the
// outcome class, and no problem document in its place.
func wantUpstream(t *testing.T, resp *http.Response, body []byte, status int, out policy.Outcome) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status = %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if got := resp.Header.Get("Callout-Outcome"); got != string(out) {
		t.Errorf("Callout-Outcome = %q, want %q", got, out)
	}
	if ct := resp.Header.Get("Content-Type"); ct == "application/problem+json" {
		t.Errorf("an upstream answer came back as a proxy problem: %s", body)
	}
}
