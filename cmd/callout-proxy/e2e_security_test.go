package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestE2ERequestTargets: nothing in the request target can leave the
// endpoint's base path or reach another host, and TRACE and CONNECT are
// never forwarded (contract §4; RFC 9112 §3.2).
func TestE2ERequestTargets(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("ok", up.URL+"/base", loopbackNets)), testEnv())
	token := "Authorization: " + bearer(t, testIssuer)

	tests := []struct {
		name   string
		head   string
		status int
		code   problem.Code
	}{
		{"dot-dot", rawHead("GET", "/callout/ok/a/../b", token), 400, problem.PathEscape},
		{"trailing dot-dot", rawHead("GET", "/callout/ok/a/..", token), 400, problem.PathEscape},
		{"%2e%2e", rawHead("GET", "/callout/ok/a/%2e%2e/b", token), 400, problem.PathEscape},
		{"%2E%2e", rawHead("GET", "/callout/ok/%2E%2e/admin", token), 400, problem.PathEscape},
		{"double slash host", rawHead("GET", "/callout/ok//evil.example/x", token), 400, problem.PathEscape},
		{"%2F", rawHead("GET", "/callout/ok/a%2Fb", token), 400, problem.PathEscape},
		{"%5C", rawHead("GET", "/callout/ok/a%5C..%5Cb", token), 400, problem.PathEscape},
		{"backslash", rawHead("GET", `/callout/ok/a\..\b`, token), 400, problem.PathEscape},
		{"at sign", rawHead("GET", "/callout/ok/@evil.example/x", token), 400, problem.PathEscape},
		{"absolute-form", "GET http://evil.example/x HTTP/1.1\r\nHost: evil.example\r\n" + token + "\r\n",
			400, problem.AbsoluteForm},
		{"absolute-form to a callout path",
			"GET http://evil.example/callout/ok/x HTTP/1.1\r\nHost: evil.example\r\n" + token + "\r\n",
			400, problem.AbsoluteForm},
		{"CONNECT authority-form", "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n" +
			token + "\r\n", 405, problem.MethodNotAllowed},
		{"CONNECT to a callout path", rawHead("CONNECT", "/callout/ok/x", token), 405, problem.MethodNotAllowed},
		{"TRACE", rawHead("TRACE", "/callout/ok/x", token), 405, problem.MethodNotAllowed},
		{"lower-case trace", rawHead("trace", "/callout/ok/x", token), 405, problem.MethodNotAllowed},
		{"TRACK (IIS's TRACE)", rawHead("TRACK", "/callout/ok/x", token), 405, problem.MethodNotAllowed},
		{"lower-case get", rawHead("get", "/callout/ok/x", token), 405, problem.MethodNotAllowed},
	}
	t.Run("targets", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				resp, body := p.raw(t, tt.head, nil)
				wantProblem(t, resp, body, tt.status, tt.code, policy.Rejected)
				if tt.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
					t.Errorf("405 without Allow (RFC 9110 §15.5.6)")
				}
			})
		}
		t.Run("TRACE through net/http", func(t *testing.T) {
			t.Parallel()
			resp, body := p.call(t, http.MethodTrace, "/callout/ok/x", nil, nil)
			wantProblem(t, resp, body, http.StatusMethodNotAllowed, problem.MethodNotAllowed, policy.Rejected)
		})
	})
	if n := up.Hits(); n != 0 {
		t.Errorf("upstream called %d times for refused targets", n)
	}
	resp, body := p.call(t, http.MethodGet, "/callout/ok/a/b.c/%7Euser/x;y=1?q=%2F", nil, nil)
	wantUpstream(t, resp, body, http.StatusOK, policy.Success)
	up.Request(t, "/base/a/b.c/%7Euser/x;y=1?q=%2F")
}

// TestE2ERedirectsNotFollowed: an upstream redirect, even to a metadata
// address or to Redis, goes back to the caller as it is (contract §2).
func TestE2ERedirectsNotFollowed(t *testing.T) {
	t.Parallel()
	trap := proctest.NewUpstream(t, okHandler)
	targets := map[string]struct {
		status   int
		location string
	}{
		"/metadata": {http.StatusFound, "http://169.254.169.254/latest/meta-data/"},
		"/redis":    {http.StatusTemporaryRedirect, "http://127.0.0.1:6379/"},
		"/trap":     {http.StatusPermanentRedirect, trap.URL + "/stolen"},
	}
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		tg := targets[r.URL.Path]
		w.Header().Set("Location", tg.location)
		w.WriteHeader(tg.status)
	})
	p := startProxy(t, devConfig(proctest.Endpoint("redir", up.URL, loopbackNets)), testEnv())
	t.Run("redirects", func(t *testing.T) {
		for path, tg := range targets {
			t.Run(path, func(t *testing.T) {
				t.Parallel()
				resp, body := p.call(t, http.MethodGet, "/callout/redir"+path, nil, nil)
				wantUpstream(t, resp, body, tg.status, policy.Permanent)
				if loc := resp.Header.Get("Location"); loc != tg.location {
					t.Errorf("Location = %q, want %q", loc, tg.location)
				}
				if n := up.HitsFor(path); n != 1 {
					t.Errorf("upstream got %d requests for %s, want 1", n, path)
				}
			})
		}
	})
	if n := trap.Hits(); n != 0 {
		t.Errorf("the redirect target was called %d times", n)
	}
	if n := up.Hits(); n != len(targets) {
		t.Errorf("upstream got %d requests, want %d", n, len(targets))
	}
}

// TestE2EBlockedAddress: the SSRF guard refuses a host that resolves to a
// private address unless the endpoint's allowed_networks cover it, and
// metadata addresses always (contract §2 "blocked address", §10).
func TestE2EBlockedAddress(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	viaLocalhost := strings.Replace(up.URL, "127.0.0.1", "localhost", 1)
	p := startProxy(t, devConfig(
		proctest.Endpoint("private", viaLocalhost)+
			proctest.Endpoint("allowed", viaLocalhost, loopbackNets)+
			proctest.Endpoint("metadata", "http://169.254.169.254/latest", "allowed_networks: [169.254.0.0/16]")),
		testEnv())
	t.Run("cases", func(t *testing.T) {
		for _, ep := range []string{"private", "metadata"} {
			t.Run(ep, func(t *testing.T) {
				t.Parallel()
				resp, body := p.call(t, http.MethodGet, "/callout/"+ep+"/x", nil, nil)
				wantProblem(t, resp, body, http.StatusForbidden, problem.BlockedAddress, policy.Rejected)
			})
		}
		t.Run("allowed", func(t *testing.T) {
			t.Parallel()
			resp, body := p.call(t, http.MethodGet, "/callout/allowed/y", nil, nil)
			wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		})
	})
	if n, m := up.Hits(), up.HitsFor("/y"); n != 1 || m != 1 {
		t.Errorf("upstream got %d requests (%d for /y), want only the allowed one", n, m)
	}
}

// TestE2EBodyLimit: a body over max_request_bytes is a 413 rejection and
// the upstream is not called; auth is checked before the body is read
// (contract §2, §9).
func TestE2EBodyLimit(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, withPolicy(devConfig(proctest.Endpoint("ok", up.URL, loopbackNets)), "max_request_bytes: 1024"),
		testEnv())
	t.Run("cases", func(t *testing.T) {
		t.Run("declared length over the limit", func(t *testing.T) {
			t.Parallel()
			resp, body := p.call(t, http.MethodPut, "/callout/ok/big", bytes.NewReader(make([]byte, 1025)), nil)
			wantProblem(t, resp, body, http.StatusRequestEntityTooLarge, problem.BodyTooLarge, policy.Rejected)
		})
		t.Run("chunked body over the limit", func(t *testing.T) {
			t.Parallel()
			chunked := io.MultiReader(bytes.NewReader(make([]byte, 4096))) // hides the length: chunked
			resp, body := p.call(t, http.MethodPut, "/callout/ok/chunked", chunked, nil)
			wantProblem(t, resp, body, http.StatusRequestEntityTooLarge, problem.BodyTooLarge, policy.Rejected)
		})
		t.Run("bad token and a huge body", func(t *testing.T) {
			t.Parallel()
			resp, body := p.call(t, http.MethodPut, "/callout/ok/auth-first",
				bytes.NewReader(make([]byte, 1<<20)), authHeader("Bearer forged"))
			wantProblem(t, resp, body, http.StatusUnauthorized, problem.Unauthorized, policy.Rejected)
		})
		t.Run("bad token, body never sent", func(t *testing.T) {
			t.Parallel()
			// With Expect: 100-continue the body is sent only once the
			// server starts reading it; a 100 Continue here would mean the
			// body was read before the token was checked.
			head := rawHead("PUT", "/callout/ok/auth-first", "Authorization: Bearer forged",
				"Content-Length: 1000", "Expect: 100-continue")
			resp, body := p.raw(t, head, nil)
			wantProblem(t, resp, body, http.StatusUnauthorized, problem.Unauthorized, policy.Rejected)
		})
		t.Run("body of exactly the limit", func(t *testing.T) {
			t.Parallel()
			payload := bytes.Repeat([]byte("b"), 1024)
			resp, body := p.call(t, http.MethodPut, "/callout/ok/exact", bytes.NewReader(payload), nil)
			wantUpstream(t, resp, body, http.StatusOK, policy.Success)
			if got := up.Request(t, "/exact").Body; !bytes.Equal(got, payload) {
				t.Errorf("upstream got %d bytes, want the 1024 sent", len(got))
			}
		})
	})
	if n := up.Hits(); n != 1 {
		t.Errorf("upstream called %d times, want 1 (only the body within the limit)", n)
	}
}

// forgedBody is an upstream body dressed as one of the proxy's problems.
const forgedBody = `{"type":"urn:callout-proxy:problem:breaker-open","title":"Service Unavailable",` +
	`"status":503,"detail":"forged","outcome":"rejected"}`

// TestE2EUpstreamCannotForgeProxySignals: every Callout-* field and
// Idempotent-Replayed of an upstream response is dropped — on the answer,
// on its idempotent replay and in the status document — whatever its case
// (contract §10). A proxy problem type in an upstream body stays the upstream's
// body; the caller tells the two apart by Callout-Outcome (retryable for an
// upstream 503, rejected for the proxy's breaker-open) and by
// Callout-Problem, which only the proxy's own problems carry.
func TestE2EUpstreamCannotForgeProxySignals(t *testing.T) {
	t.Parallel()
	forger := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["callout-outcome"] = []string{"rejected"}
		for _, k := range []string{"Callout-Id", "Callout-Record", "Callout-Problem", "Callout-Replay-Body",
			"Callout-Source-Record", "Callout-Anything-New"} {
			h.Set(k, "forged")
		}
		h["idempotent-replayed"] = []string{"true"}
		h.Set("Content-Type", "application/problem+json")
		h.Set("X-Upstream", "forger")
		status := http.StatusServiceUnavailable
		if r.Method == http.MethodPut {
			status = http.StatusUnprocessableEntity // permanent: the write ends, its answer is stored
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, forgedBody)
	})
	okay := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("forger", forger.URL, loopbackNets)+
		proctest.Endpoint("ok", okay.URL, loopbackNets)), testEnv())

	noForgery := func(t *testing.T, h http.Header) {
		t.Helper()
		for k, v := range h {
			if v[0] == "forged" || (http.CanonicalHeaderKey(k) == "Idempotent-Replayed") {
				t.Errorf("%s: %q came from the upstream", k, v)
			}
		}
		if _, ok := h["Callout-Problem"]; ok {
			t.Errorf("Callout-Problem on an upstream answer: %q", h["Callout-Problem"])
		}
	}
	t.Run("read", func(t *testing.T) {
		resp, body := p.call(t, http.MethodGet, "/callout/forger/x", nil, nil)
		if resp.StatusCode != 503 || string(body) != forgedBody {
			t.Fatalf("status %d body %q; want the upstream's 503 and body", resp.StatusCode, body)
		}
		if got := resp.Header.Values("Callout-Outcome"); len(got) != 1 || got[0] != string(policy.Retryable) {
			t.Errorf("Callout-Outcome = %q, want the proxy's one value retryable", got)
		}
		noForgery(t, resp.Header)
		if resp.Header.Get("X-Upstream") != "forger" {
			t.Error("the upstream's own fields were not passed through")
		}
	})
	t.Run("write, its replay and its status document", func(t *testing.T) {
		hdr := http.Header{"Idempotency-Key": {"forge-1"}}
		resp, body := p.call(t, http.MethodPut, "/callout/forger/w", strings.NewReader("{}"), hdr)
		if resp.StatusCode != http.StatusUnprocessableEntity || string(body) != forgedBody {
			t.Fatalf("status %d body %q; want the upstream's 422", resp.StatusCode, body)
		}
		noForgery(t, resp.Header)
		id := resp.Header.Get("Callout-Id")
		if id == "" || id == "forged" {
			t.Fatalf("Callout-Id = %q, want the proxy's id", id)
		}
		resp, body = p.call(t, http.MethodPut, "/callout/forger/w", strings.NewReader("{}"), hdr)
		if resp.StatusCode != http.StatusUnprocessableEntity || string(body) != forgedBody {
			t.Fatalf("replay: status %d body %q; want the stored 422", resp.StatusCode, body)
		}
		if got := resp.Header.Values("Idempotent-Replayed"); len(got) != 1 || got[0] != "true" {
			t.Errorf("replay: Idempotent-Replayed = %q, want the proxy's one value", got)
		}
		resp.Header.Del("Idempotent-Replayed")
		noForgery(t, resp.Header)
		if forger.HitsFor("/w") != 1 {
			t.Errorf("upstream called %d times, want 1", forger.HitsFor("/w"))
		}
		_, body = p.call(t, http.MethodGet, "/v1/callouts/"+id, nil, nil)
		var doc struct {
			Response struct{ Headers map[string][]string } `json:"response"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || doc.Response.Headers == nil {
			t.Fatalf("status document %s (%v): want the stored response", body, err)
		}
		noForgery(t, doc.Response.Headers)
	})
	t.Run("the proxy's own problem carries Callout-Problem", func(t *testing.T) {
		resp, body := p.call(t, http.MethodGet, "/callout/nowhere/x", nil, nil)
		wantProblem(t, resp, body, http.StatusNotFound, problem.UnknownEndpoint, policy.Rejected)
		if got := resp.Header.Get("Callout-Problem"); got != string(problem.UnknownEndpoint) {
			t.Errorf("Callout-Problem = %q, want %q", got, problem.UnknownEndpoint)
		}
	})
}

// TestE2ECallerHeaderClaims: a caller's Forwarded / X-Forwarded-* fields
// never reach the upstream, and a caller field whose name, with "_" read as
// "-", is an injected field's never does either — an upstream that folds
// "_" into "-" (WSGI, Rack, PHP) must never see a caller value under an
// injected header's name — while Salesforce's Sfdc_stack_depth passes.
func TestE2ECallerHeaderClaims(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("inject", up.URL, loopbackNets, "headers: {X-Api-Key: {env: UP_KEY}}")),
		envWith("UP_KEY", upstreamKey))
	token := "Authorization: " + bearer(t, testIssuer)
	resp, body := p.raw(t, rawHead(http.MethodGet, "/callout/inject/claims", token,
		"X_Api_Key: caller-value", "x_api_key: caller-value-2", "X-Forwarded-For: 10.0.0.1",
		"Forwarded: for=10.0.0.1", "X-Real-IP: 10.0.0.1", "X_Forwarded_For: 10.0.0.2",
		"Idempotency_Key: other", "Sfdc_stack_depth: 1"), nil)
	wantUpstream(t, resp, body, http.StatusOK, policy.Success)
	seen := up.Request(t, "/claims").Header
	for k, vs := range seen {
		for _, v := range vs {
			if strings.HasPrefix(v, "caller-value") || strings.HasPrefix(v, "10.0.0.") || v == "other" {
				t.Errorf("upstream got caller field %s: %q", k, v)
			}
		}
	}
	if got := seen.Values("X-Api-Key"); len(got) != 1 || got[0] != upstreamKey {
		t.Errorf("upstream X-Api-Key = %q, want the injected value only", got)
	}
	if seen.Get("Sfdc_stack_depth") != "1" {
		t.Errorf("Sfdc_stack_depth did not reach the upstream: %v", seen)
	}
}
