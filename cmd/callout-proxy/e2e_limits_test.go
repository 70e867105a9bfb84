package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// withLimits adds a limits section to a devConfig configuration.
func withLimits(cfg string, lines ...string) string {
	return cfg + "limits:\n  " + strings.Join(lines, "\n  ") + "\n"
}

// TestE2EHeaderLimits: a callout request over limits.max_header_fields or
// limits.max_header_bytes is 431 headers-too-large, problem+json, and its
// connection closed; one over twice max_header_bytes is refused by net/http
// itself, 431 too; the limits leave a normal callout alone (contract §10).
func TestE2EHeaderLimits(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, withLimits(devConfig(proctest.Endpoint("api", up.URL, loopbackNets)),
		"max_header_bytes: 8192", "max_header_fields: 20"), testEnv())
	token := "Authorization: " + bearer(t, testIssuer)
	many := []string{token}
	for i := range 25 {
		many = append(many, "X-F"+strconv.Itoa(i)+": v")
	}
	resp, body := p.raw(t, rawHead(http.MethodGet, "/callout/api/x", many...), nil)
	wantProblem(t, resp, body, http.StatusRequestHeaderFieldsTooLarge, problem.HeadersTooLarge, policy.Rejected)
	if !resp.Close {
		t.Error("the connection of a 431 stays open")
	}
	resp, body = p.raw(t, rawHead(http.MethodGet, "/callout/api/x", token, "X-Big: "+strings.Repeat("b", 9000)), nil)
	pb := wantProblem(t, resp, body, http.StatusRequestHeaderFieldsTooLarge, problem.HeadersTooLarge, policy.Rejected)
	if !strings.Contains(pb.Detail, "max_header_bytes") {
		t.Errorf("detail %q does not name the limit", pb.Detail)
	}
	// Over twice the limit net/http answers a bare 431 and closes at once;
	// the client may see the reset of its unread bytes before the answer.
	conn := p.dial(t)
	_, _ = io.WriteString(conn, rawHead(http.MethodGet, "/callout/api/x", token, "X-Huge: "+strings.Repeat("b", 40000))+"\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil && resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a header over twice the limit: status %d, want 431 from net/http", resp.StatusCode)
	}
	conn.Close()
	if up.HitsFor("/x") != 0 {
		t.Error("an oversized header reached the upstream")
	}
	resp, body = p.raw(t, rawHead(http.MethodGet, "/callout/api/x", token, "X-Ok: "+strings.Repeat("o", 4000)), nil)
	wantUpstream(t, resp, body, http.StatusOK, policy.Success)
}

// TestE2ETransferEncodingAndContentLength: a request with both
// Transfer-Encoding and Content-Length is answered by its chunked body and
// its connection closed (RFC 9112 §6.3), so what follows on the connection
// — a smuggled second request — is never read.
func TestE2ETransferEncodingAndContentLength(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("api", up.URL, loopbackNets)), testEnv())
	conn := p.dial(t)
	defer conn.Close()
	smuggled := "GET /callout/api/smuggled HTTP/1.1\r\nHost: x\r\nAuthorization: " + bearer(t, testIssuer) + "\r\n\r\n"
	req := rawHead(http.MethodPut, "/callout/api/te", "Authorization: "+bearer(t, testIssuer),
		"Content-Length: "+strconv.Itoa(5+len(smuggled)), "Transfer-Encoding: chunked") +
		"\r\n3\r\nabc\r\n0\r\n\r\n" + smuggled
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	wantUpstream(t, resp, body, http.StatusOK, policy.Success)
	if !resp.Close {
		t.Error("the response does not close the connection")
	}
	if got := string(up.Request(t, "/te").Body); got != "abc" {
		t.Errorf("upstream got body %q, want the chunked body abc", got)
	}
	if _, err := http.ReadResponse(br, nil); err == nil {
		t.Error("the proxy answered the request smuggled behind the chunked body")
	}
	if up.HitsFor("/smuggled") != 0 {
		t.Error("the smuggled request reached the upstream")
	}
}

// TestE2EBodyReadTimeout: a body that stops arriving is 408
// request-timeout once limits.body_read_timeout has passed, its connection
// closed, nothing forwarded; the proxy serves others meanwhile.
func TestE2EBodyReadTimeout(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, withLimits(devConfig(proctest.Endpoint("api", up.URL, loopbackNets)),
		"body_read_timeout: 300ms"), testEnv())
	conn := p.dial(t)
	defer conn.Close()
	head := rawHead(http.MethodPut, "/callout/api/slow", "Authorization: "+bearer(t, testIssuer),
		"Content-Length: 1000") + "\r\n" + "only part of the body"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	resp, body := p.call(t, http.MethodGet, "/healthz", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while a body trickles: %d %s", resp.StatusCode, body)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	wantProblem(t, resp, body, http.StatusRequestTimeout, problem.RequestTimeout, policy.Rejected)
	if !resp.Close {
		t.Error("the connection of a 408 stays open")
	}
	if up.HitsFor("/slow") != 0 {
		t.Error("a partial body was forwarded")
	}
}

// TestE2EOverloaded: with a memory budget of 24 MiB (limits.max_inflight_bytes)
// and a slow upstream, concurrent 4 MiB writes past the budget wait briefly
// and get 503 overloaded with Retry-After; a small read is answered all the
// while (the budget keeps room for small callouts), and after the flood a
// large write is accepted again: nothing leaked.
func TestE2EOverloaded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			<-release
		}
		okHandler(w, r)
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	p := startProxy(t, withLimits(devConfig(proctest.Endpoint("api", up.URL, loopbackNets)),
		"max_inflight_bytes: 25165824", "overload_wait: 100ms"), testEnv())
	body := strings.Repeat("x", 4<<20)
	const writers = 12 // 48 MiB offered against 21 MiB for large requests
	statuses := make(chan *http.Response, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, p.URL+"/callout/api/big",
				strings.NewReader(body))
			req.Header.Set("Authorization", bearer(t, testIssuer))
			req.Header.Set("Idempotency-Key", "big-"+strconv.Itoa(i))
			resp, err := noRedirectClient.Do(req)
			if err != nil {
				t.Errorf("write %d: %v", i, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				wantProblem(t, resp, b, http.StatusServiceUnavailable, problem.Overloaded, policy.Rejected)
				if resp.Header.Get("Retry-After") != "1" {
					t.Errorf("overloaded without Retry-After: 1: %v", resp.Header)
				}
			}
			statuses <- resp
		})
	}
	overloaded := 0
	for range writers - 5 { // 5 fit in 21 MiB; the others are refused
		if resp := <-statuses; resp.StatusCode == http.StatusServiceUnavailable {
			overloaded++
		}
	}
	resp, b := p.call(t, http.MethodGet, "/callout/api/small", nil, nil)
	wantUpstream(t, resp, b, http.StatusOK, policy.Success)
	close(release)
	wg.Wait()
	close(statuses)
	for resp := range statuses {
		if resp.StatusCode == http.StatusServiceUnavailable {
			overloaded++
		}
	}
	if overloaded < writers-5 {
		t.Errorf("%d writes overloaded, want at least %d of %d", overloaded, writers-5, writers)
	}
	resp, b = p.call(t, http.MethodPut, "/callout/api/after", strings.NewReader(body),
		http.Header{"Idempotency-Key": {"after"}})
	wantUpstream(t, resp, b, http.StatusOK, policy.Success)
	_, metrics := get(t, p.AdminURL+"/metrics")
	if !strings.Contains(string(metrics), "\ncallout_overloaded_total ") ||
		strings.Contains(string(metrics), "\ncallout_overloaded_total 0\n") {
		t.Errorf("callout_overloaded_total not counted:\n%s", metricLines(string(metrics), "callout_overloaded_total"))
	}
	if !strings.Contains(string(metrics), "\ncallout_inflight_bytes 0\n") {
		t.Errorf("bytes still held after every answer:\n%s", metricLines(string(metrics), "callout_inflight_bytes"))
	}
}

// metricLines returns the lines of /metrics text starting with name.
func metricLines(text, name string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, name) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestE2EWriteTimeout: a caller that asks for an 11 MiB answer and stops
// reading holds the proxy's handler, its connection and the answer in the
// memory budget only until limits.write_timeout: then the connection is
// closed and the budget freed (slow-read attack).
func TestE2EWriteTimeout(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("r", 11<<20)
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, big) })
	p := startProxy(t, withLimits(devConfig(proctest.Endpoint("api", up.URL, loopbackNets)), "write_timeout: 300ms"), testEnv())
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, rawHead(http.MethodGet, "/callout/api/big", "Authorization: "+bearer(t, testIssuer))+"\r\n"); err != nil {
		t.Fatal(err)
	}
	// The caller reads nothing. Once the upstream has been asked, the
	// request is held in the budget until its answer is written or given
	// up: poll the metric (bounded) rather than time it.
	for end := time.Now().Add(20 * time.Second); up.Hits() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the request never reached the upstream")
		}
	}
	held := func() string {
		_, m := get(t, p.AdminURL+"/metrics")
		return metricLines(string(m), "callout_inflight_bytes ")
	}
	for end := time.Now().Add(20 * time.Second); held() != "callout_inflight_bytes 0"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s 20 s after the caller stopped reading: the stalled answer was never released", held())
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if err == nil && n >= int64(len(big)) {
		t.Errorf("the whole answer (%d bytes) was delivered to a caller that did not read", n)
	}
}

// TestE2ERefusalBeforeTheBodyIsAnsweredAtOnce: a request refused before its
// body is read (here: no token) is answered at once with its connection
// closed, however long the body promised takes, instead of after
// limits.body_read_timeout (net/http would first try to read the unread
// body). Without it, connections that promise a body and send nothing fill
// the connection cap with no token at all. body_read_timeout is an hour
// here: the 401 must not wait for it.
func TestE2ERefusalBeforeTheBodyIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, withLimits(devConfig(proctest.Endpoint("api", up.URL, loopbackNets)),
		"body_read_timeout: 1h"), testEnv())
	for _, tc := range []struct {
		name, method, path, auth string
		status                   int
		code                     problem.Code
	}{
		{"no token", http.MethodPost, "/callout/api/x", "", http.StatusUnauthorized, problem.Unauthorized},
		{"unknown endpoint", http.MethodPost, "/callout/nosuch/x", "Authorization: " + bearer(t, testIssuer),
			http.StatusNotFound, problem.UnknownEndpoint},
		{"method not allowed", http.MethodPost, "/healthz", "", http.StatusMethodNotAllowed, problem.MethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := p.dial(t) // far below the hour the body may take
			defer conn.Close()
			lines := []string{"Content-Length: 100"}
			if tc.auth != "" {
				lines = append(lines, tc.auth)
			}
			if _, err := io.WriteString(conn, rawHead(tc.method, tc.path, lines...)+"\r\nab"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body arrived: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.code != problem.MethodNotAllowed {
				wantProblem(t, resp, body, tc.status, tc.code, policy.Rejected)
			}
			if !resp.Close {
				t.Error("the connection of a refusal with an unread body stays open")
			}
		})
	}
}

// One organisation cannot fill an endpoint that others share (contract §10):
// with two issuers configured, each gets a fair share of max_backlog_items
// by default. Org A's respond-async writes are refused backlog-full, naming
// its share, once it holds half; org B's are still accepted.
func TestOrganisationShareOfTheBacklog(t *testing.T) {
	// The upstream fails and the next attempt is an hour away, so every
	// accepted callout stays pending for the whole test.
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	p := startProxy(t, withPolicy(devConfig(proctest.Endpoint("shared", up.URL, "allowed_networks: [127.0.0.0/8]",
		"max_backlog_items: 4")), "base_delay: 1h", "max_delay: 1h"), testEnv())
	const orgB = "https://sandbox--uat.sandbox.my.salesforce.com"
	write := func(iss string, i int) (*http.Response, []byte) {
		return p.call(t, http.MethodPost, "/callout/shared/v1/items", strings.NewReader(`{"n":1}`), http.Header{
			"Authorization":   {bearer(t, iss)},
			"Prefer":          {"respond-async"},
			"Idempotency-Key": {fmt.Sprintf("%s-%d", iss[8:11], i)},
		})
	}
	for i := range 2 {
		if resp, body := write(testIssuer, i); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("org A write %d = %d %s, want 202", i, resp.StatusCode, body)
		}
	}
	resp, body := write(testIssuer, 2)
	pb := wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.BacklogFull, policy.Rejected)
	if !strings.Contains(pb.Detail, "organisation's share") {
		t.Errorf("detail %q does not say it is the organisation's share", pb.Detail)
	}
	for i := range 2 {
		if resp, body := write(orgB, i); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("org B write %d while org A is at its share = %d %s, want 202", i, resp.StatusCode, body)
		}
	}
}
