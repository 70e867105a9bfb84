package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestE2EStatusPassThrough: every upstream status comes back as the
// upstream sent it, with its outcome class (contract §2).
func TestE2EStatusPassThrough(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, statusHandler)
	// 429 with Retry-After pauses its whole endpoint (contract §3), so it has
	// an endpoint of its own.
	p := startProxy(t, devConfig(proctest.Endpoint("status-api", up.URL, loopbackNets)+
		proctest.Endpoint("pause-api", up.URL, loopbackNets)), testEnv())

	tests := []struct {
		status int
		want   policy.Outcome
	}{
		{200, policy.Success}, {201, policy.Success}, {204, policy.Success},
		{301, policy.Permanent}, {302, policy.Permanent},
		{400, policy.Permanent}, {403, policy.Permanent}, {404, policy.Permanent},
		{408, policy.Retryable}, {409, policy.Permanent}, {422, policy.Permanent},
		{429, policy.Retryable},
		{500, policy.Retryable}, {501, policy.Permanent}, {502, policy.Retryable},
		{503, policy.Retryable}, {504, policy.Retryable},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			path := "/status/" + strconv.Itoa(tt.status)
			name := "status-api"
			if tt.status == http.StatusTooManyRequests {
				name = "pause-api"
			}
			resp, body := p.call(t, http.MethodGet, "/callout/"+name+path, nil, nil)
			wantUpstream(t, resp, body, tt.status, tt.want)
			if got := resp.Header.Get("X-Upstream-Status"); got != strconv.Itoa(tt.status) {
				t.Errorf("X-Upstream-Status = %q: the upstream's headers were not passed through", got)
			}
			wantBody := fmt.Sprintf("upstream says %d", tt.status)
			if tt.status == http.StatusNoContent {
				wantBody = ""
			}
			if string(body) != wantBody {
				t.Errorf("body = %q, want %q", body, wantBody)
			}
			switch tt.status {
			case 301, 302:
				if loc := resp.Header.Get("Location"); loc != "/moved/elsewhere" {
					t.Errorf("Location = %q, want the upstream's", loc)
				}
			case 429:
				if ra := resp.Header.Get("Retry-After"); ra != "7" {
					t.Errorf("Retry-After = %q, want the upstream's 7", ra)
				}
				// The pause now holds the endpoint: the next read is
				// refused before dispatch, with the time left.
				again, body := p.call(t, http.MethodGet, "/callout/pause-api/status/200", nil, nil)
				wantProblem(t, again, body, http.StatusServiceUnavailable, problem.EndpointPaused, policy.Rejected)
				if ra, _ := strconv.Atoi(again.Header.Get("Retry-After")); ra < 1 || ra > 7 {
					t.Errorf("paused Retry-After = %q, want 1..7", again.Header.Get("Retry-After"))
				}
			}
			if n := up.HitsFor(path); n != 1 {
				t.Errorf("upstream called %d times for %s, want 1 (nothing retried inline)", n, path)
			}
		})
	}
	// A HEAD answer keeps the upstream's Content-Length (the length a GET
	// would have) and carries no body (RFC 9110 §9.3.2).
	t.Run("HEAD", func(t *testing.T) {
		t.Parallel()
		resp, body := p.call(t, http.MethodHead, "/callout/status-api/status/200?via=head", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if want := strconv.Itoa(len("upstream says 200")); resp.Header.Get("Content-Length") != want || len(body) != 0 {
			t.Errorf("Content-Length %q (want %s), %d body bytes (want 0)",
				resp.Header.Get("Content-Length"), want, len(body))
		}
		if seen := up.Request(t, "/status/200?via=head"); seen.Method != http.MethodHead {
			t.Errorf("upstream method = %s, want HEAD", seen.Method)
		}
	})
}

// TestE2ENoAnswer: failures without an upstream answer become the proxy's
// own problem documents, retryable, and a response over max_response_bytes
// is permanent (contract §2, §3).
func TestE2ENoAnswer(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := proctest.NewUpstream(t, func(http.ResponseWriter, *http.Request) { <-release })
	t.Cleanup(func() { close(release) }) // runs before hang's server closes
	trickle := proctest.NewUpstream(t, trickleHandler)
	big := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(bytes.Repeat([]byte("z"), 2048))
	})
	exact := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("z"), 1024))
	})
	cfg := devConfig(
		proctest.Endpoint("refused", fmt.Sprintf("http://127.0.0.1:%d", proctest.ClosedPort(t)), loopbackNets) +
			proctest.Endpoint("hang", hang.URL, loopbackNets,
				"connect_timeout: 1s", "header_timeout: 200ms", "attempt_timeout: 2s") +
			proctest.Endpoint("trickle", trickle.URL, loopbackNets,
				"connect_timeout: 300ms", "header_timeout: 300ms", "attempt_timeout: 300ms") +
			proctest.Endpoint("big", big.URL, loopbackNets) +
			proctest.Endpoint("exact", exact.URL, loopbackNets))
	p := startProxy(t, withPolicy(cfg, "max_response_bytes: 1024"), testEnv())

	tests := []struct {
		name     string
		endpoint string
		status   int
		code     problem.Code
		out      policy.Outcome
		detail   string // a word the detail must contain
	}{
		{"connect refused", "refused", 502, problem.UpstreamUnavailable, policy.Retryable, "connect_refused"},
		{"no headers within header_timeout", "hang", 504, problem.UpstreamTimeout, policy.Retryable, "header"},
		{"body slower than attempt_timeout", "trickle", 504, problem.UpstreamTimeout, policy.Retryable, "attempt"},
		{"response over max_response_bytes", "big", 502, problem.ResponseTooLarge, policy.Permanent, "1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			resp, body := p.call(t, http.MethodGet, "/callout/"+tt.endpoint+"/x", nil, nil)
			pb := wantProblem(t, resp, body, tt.status, tt.code, tt.out)
			if !strings.Contains(pb.Detail, tt.detail) {
				t.Errorf("detail %q does not mention %q", pb.Detail, tt.detail)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s: a per-attempt limit was not enforced", d)
			}
		})
	}
	t.Run("response of exactly max_response_bytes", func(t *testing.T) {
		t.Parallel()
		resp, body := p.call(t, http.MethodGet, "/callout/exact/x", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if len(body) != 1024 || resp.ContentLength != 1024 {
			t.Errorf("got %d bytes, Content-Length %d; want 1024", len(body), resp.ContentLength)
		}
	})
}

// trickleHandler sends its headers at once, then one byte every 50 ms for 3
// s (ten times the endpoint's attempt limit) unless the proxy hangs up.
func trickleHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	f.Flush()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range 60 {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		if _, err := io.WriteString(w, "x"); err != nil {
			return
		}
		f.Flush()
	}
}

// TestE2EUnknownEndpoint: a name outside the allow-list is a 404 rejection.
func TestE2EUnknownEndpoint(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("known", up.URL, loopbackNets)), testEnv())
	t.Run("paths", func(t *testing.T) {
		for _, path := range []string{"/callout/unknown/x", "/callout/Known/x", "/callout/unknown"} {
			t.Run(path, func(t *testing.T) {
				t.Parallel()
				resp, body := p.call(t, http.MethodGet, path, nil, nil)
				wantProblem(t, resp, body, http.StatusNotFound, problem.UnknownEndpoint, policy.Rejected)
			})
		}
	})
	if n := up.Hits(); n != 0 {
		t.Errorf("upstream called %d times", n)
	}
}
