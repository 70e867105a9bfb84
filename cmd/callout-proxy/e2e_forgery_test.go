package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

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
