package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// Admin tokens of devConfig (testEnv): ops has scope write, viewer read.
const (
	opsToken    = "admin-token-value"
	viewerToken = "viewer-token-value"
)

// admin sends an admin request to base (an admin listener's URL) with
// token ("" for none) and decodes a 200 JSON answer into v (nil: not decoded). It
// returns the response and its body whatever the status.
func admin(t *testing.T, base, method, path, token string, v any) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, body := doRequest(t, req)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, body, err)
		}
	}
	return resp, body
}

// doRequest sends req with noRedirectClient and reads the whole answer.
func doRequest(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := noRedirectClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, proctest.ReadBody(t, resp)
}

// endpointDoc reads one endpoint's state from the admin API of base.
func endpointDoc(t *testing.T, base, name string) api.EndpointDoc {
	t.Helper()
	var doc api.EndpointDoc
	if resp, body := admin(t, base, http.MethodGet, "/admin/v1/endpoints/"+name, viewerToken, &doc); resp.StatusCode != 200 {
		t.Fatalf("GET endpoint %s = %d %s", name, resp.StatusCode, body)
	}
	return doc
}

// pollUntil calls cond every 20 ms until it is true; it fails the test
// with what when timeout passes first (proctest.Eventually).
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	proctest.Eventually(t, timeout, 20*time.Millisecond, what, cond)
}

// TestE2EBreakerThreshold: the counting cases through one proxy,
// threshold 20 (contract §6). Only retryable failures count; 429 and permanent
// answers never count and — the rule we chose — a permanent answer does
// not reset the streak either: only a success does.
func TestE2EBreakerThreshold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		statuses []int
		wantOpen bool
		wantCF   int // consecutive failures after the check request
	}{
		{"25 x 404 then forwarded", repeatStatus(404, 25), false, 0},
		{"19 x 503, 404, 503 opens", append(append(repeatStatus(503, 19), 404), 503), true, 20},
		{"20 x 503 opens", repeatStatus(503, 20), true, 20},
		// The check request's 200 then resets the streak.
		{"19 x 503 stays closed", repeatStatus(503, 19), false, 0},
		{"30 x 429 stays closed", repeatStatus(429, 30), false, 0},
	}
	var eps string
	ups := make([]*proctest.Upstream, len(tests))
	for i := range tests {
		ups[i] = proctest.NewUpstream(t, bareStatusHandler)
		eps += proctest.Endpoint("count-"+strconv.Itoa(i), ups[i].URL, loopbackNets, singleTenant, "breaker_failures: 20",
			"breaker_probe_interval: 10m")
	}
	p := startProxy(t, devConfig(eps), testEnv())
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := "count-" + strconv.Itoa(i)
			for n, st := range tt.statuses {
				resp, body := p.call(t, http.MethodGet, "/callout/"+name+"/status/"+strconv.Itoa(st), nil, nil)
				if resp.StatusCode != st {
					t.Fatalf("request %d: status %d, want the upstream's %d; body %s", n+1, resp.StatusCode, st, body)
				}
			}
			resp, body := p.call(t, http.MethodGet, "/callout/"+name+"/status/200", nil, nil)
			if tt.wantOpen {
				wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.BreakerOpen, policy.Rejected)
				// The probe is about 600 s away (contract §4: Retry-After is
				// the seconds until it, as the detail says; the exact figure
				// on an injected clock is TestGateRetryAfter's).
				ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
				if err != nil || ra < 590 || ra > 600 || !strings.Contains(string(body), "next probe is in "+strconv.Itoa(ra)+" s") {
					t.Errorf("Retry-After = %q, body %s; want the seconds to the probe, about 600, also in the detail",
						resp.Header.Get("Retry-After"), body)
				}
			} else {
				wantUpstream(t, resp, body, http.StatusOK, policy.Success)
			}
			wantHits := len(tt.statuses)
			if !tt.wantOpen {
				wantHits++
			}
			if n := ups[i].Hits(); n != wantHits {
				t.Errorf("upstream hits = %d, want %d", n, wantHits)
			}
			doc := endpointDoc(t, p.AdminURL, name)
			if (doc.Breaker == "open") != tt.wantOpen || doc.ConsecutiveFailures != tt.wantCF {
				t.Errorf("endpoint state = %+v, want open=%v, %d consecutive failures", doc, tt.wantOpen, tt.wantCF)
			}
		})
	}
}

// repeatStatus is n copies of status.
func repeatStatus(status, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = status
	}
	return out
}

// metricValue is the value of the /metrics sample of name carrying every
// label given, read from the admin listener of p; 0 when absent.
func metricValue(t *testing.T, p *proxyUnderTest, name string, labels ...string) float64 {
	t.Helper()
	_, body := get(t, p.AdminURL+"/metrics")
	line := metricLine(string(body), name, labels...)
	if line == "" {
		return 0
	}
	v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		t.Fatalf("metric line %q: %v", line, err)
	}
	return v
}

// statusDoc decodes a status document (a 202's body or GET /v1/callouts/{id}).
func statusDoc(t *testing.T, body []byte) api.StatusDocument {
	t.Helper()
	var d api.StatusDocument
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("status document %s: %v", body, err)
	}
	return d
}

// keyed is a header with an Idempotency-Key and, when async, Prefer:
// respond-async.
func keyed(key string, async bool) http.Header {
	h := http.Header{"Idempotency-Key": {strconv.Quote(key)}, "Content-Type": {"application/json"}}
	if async {
		h.Set("Prefer", "respond-async")
	}
	return h
}

// TestE2EBreakerOpenHoldsWrites: while the breaker is open a read is
// refused (503, Retry-After = seconds to the probe) and a write is accepted
// held (202) without consuming an attempt (contract §4); both count in
// callout_deferred_total, the opening in callout_breaker_transitions_total.
func TestE2EBreakerOpenHoldsWrites(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, bareStatusHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("hold-api", up.URL, loopbackNets, singleTenant, "breaker_failures: 2",
		"breaker_probe_interval: 10m")), testEnv())
	for range 2 {
		resp, body := p.call(t, http.MethodGet, "/callout/hold-api/status/503", nil, nil)
		wantUpstream(t, resp, body, http.StatusServiceUnavailable, policy.Retryable)
	}
	opened := endpointDoc(t, p.AdminURL, "hold-api")
	if opened.Breaker != "open" || opened.OpenedAt == nil || opened.NextProbeAt == nil ||
		!opened.NextProbeAt.Equal(opened.OpenedAt.Add(10*time.Minute)) {
		t.Fatalf("after 2 failures = %+v, want open with the probe 10m after opened_at", opened)
	}

	resp, body := p.call(t, http.MethodGet, "/callout/hold-api/status/200", nil, nil)
	wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.BreakerOpen, policy.Rejected)

	resp, body = p.call(t, http.MethodPost, "/callout/hold-api/status/201", strings.NewReader(`{"a":1}`),
		keyed("hold-1", false))
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Callout-Outcome") != string(policy.Retryable) {
		t.Fatalf("write while open = %d %s %s, want 202 retryable", resp.StatusCode,
			resp.Header.Get("Callout-Outcome"), body)
	}
	doc := statusDoc(t, body)
	if doc.State != "held" || len(doc.Attempts) != 0 || doc.NextAttemptAt == nil ||
		!doc.NextAttemptAt.Equal(*opened.NextProbeAt) {
		t.Fatalf("held write = %+v, want held until the probe time %v, no attempt", doc, opened.NextProbeAt)
	}
	if n := up.Hits(); n != 2 {
		t.Errorf("upstream hits = %d, want 2 (nothing forwarded while open)", n)
	}
	ep := `endpoint="hold-api"`
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"callout_deferred_total", []string{ep, `reason="breaker_open"`}, 2},
		{"callout_breaker_transitions_total", []string{ep, `to="open"`}, 1},
		{"callout_rejected_total", []string{ep, `code="breaker-open"`}, 1},
	} {
		if got := metricValue(t, p, m.name, m.labels...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

// TestE2EPermanentScheduledCalloutDeadLettersAtOnce: an upstream that
// always answers 403 to a scheduled callout gets exactly one dispatch; the
// callout is a dead letter (reason permanent) at once, never retried, and
// the breaker does not count it.
func TestE2EPermanentScheduledCalloutDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, bareStatusHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("forbid-api", up.URL, loopbackNets)), testEnv())
	resp, body := p.call(t, http.MethodPost, "/callout/forbid-api/status/403", strings.NewReader(`{}`),
		keyed("forbid-1", true))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("respond-async write = %d %s, want 202", resp.StatusCode, body)
	}
	id := statusDoc(t, body).ID
	var doc api.StatusDocument
	pollUntil(t, 10*time.Second, "the callout did not become a dead letter", func() bool {
		_, b := p.call(t, http.MethodGet, "/v1/callouts/"+id, nil, nil)
		doc = statusDoc(t, b)
		return doc.State == "dead_lettered"
	})
	if len(doc.Attempts) != 1 || doc.Attempts[0].Status != 403 || doc.Attempts[0].Outcome != policy.Permanent ||
		doc.DeadLetterReason != "permanent" || doc.NextAttemptAt != nil {
		t.Fatalf("dead letter = %+v, want one 403 attempt, reason permanent, nothing next", doc)
	}
	if n := up.HitsFor("/status/403"); n != 1 {
		t.Errorf("upstream hits = %d, want exactly 1", n)
	}
	st := endpointDoc(t, p.AdminURL, "forbid-api")
	if st.ConsecutiveFailures != 0 || st.Breaker != "closed" || st.BacklogItems != 0 || st.DeadLetters != 1 {
		t.Errorf("endpoint = %+v, want closed, no failure counted, empty backlog, 1 dead letter", st)
	}
	// the dispatcher counts the dead letter after the store wrote it: the
	// status document can show it first
	pollUntil(t, 10*time.Second, "callout_dead_letters_total{reason=permanent} never reached 1", func() bool {
		return metricValue(t, p, "callout_dead_letters_total", `endpoint="forbid-api"`, `reason="permanent"`) >= 1
	})
	if got := metricValue(t, p, "callout_dead_letters_total", `endpoint="forbid-api"`, `reason="permanent"`); got != 1 {
		t.Errorf("callout_dead_letters_total{reason=permanent} = %v, want 1", got)
	}
}

// TestE2EAutoDisable: contract §6 auto-disable, measured by the time since the
// outage began (the first counting failure after a success), not by
// counting calls. Failures within disable_after (2 s here) do not disable
// the endpoint however many they are; the first one after it does: its
// pending callouts become dead letters (reason endpoint_disabled), it
// refuses reads and writes, and only an admin re-enables it. The owner
// hook hears of the outage once.
func TestE2EAutoDisable(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, bareStatusHandler)
	cfg := withPolicy(devConfig(proctest.Endpoint("flaky-api", up.URL, loopbackNets, "breaker_failures: 1000")),
		"disable_after: 2s", "base_delay: 1h", "max_delay: 1h")
	p := startProxy(t, cfg, testEnv())
	resp, body := p.call(t, http.MethodPost, "/callout/flaky-api/status/503", strings.NewReader(`{}`),
		keyed("auto-1", false))
	pending := statusDoc(t, body)
	if resp.StatusCode != http.StatusAccepted || pending.State != "scheduled" {
		t.Fatalf("failing write = %d %+v, want 202 scheduled an hour later", resp.StatusCode, pending)
	}
	began := endpointDoc(t, p.AdminURL, "flaky-api").OutageStartedAt
	if began == nil {
		t.Fatal("the first counting failure began no outage")
	}
	// Up to 10 more failures, each sent well inside disable_after (a
	// loaded machine sends fewer: the window, not the count, is the rule).
	sent := 0
	for ; sent < 10 && time.Since(*began) < time.Second; sent++ {
		resp, body := p.call(t, http.MethodGet, "/callout/flaky-api/status/503", nil, nil)
		wantUpstream(t, resp, body, http.StatusServiceUnavailable, policy.Retryable)
	}
	if doc := endpointDoc(t, p.AdminURL, "flaky-api"); time.Since(*began) < 2*time.Second && doc.Disabled {
		t.Fatalf("disabled after %d failures within disable_after: %+v", doc.ConsecutiveFailures, doc)
	}
	t.Logf("%d failures inside disable_after left the endpoint enabled", sent+1)

	untilTime(began.Add(2 * time.Second))
	resp, body = p.call(t, http.MethodGet, "/callout/flaky-api/status/503", nil, nil)
	wantUpstream(t, resp, body, http.StatusServiceUnavailable, policy.Retryable)
	doc := endpointDoc(t, p.AdminURL, "flaky-api")
	if !doc.Disabled || !strings.HasPrefix(doc.DisabledReason, "auto: no success since") ||
		doc.BacklogItems != 0 || doc.DeadLetters != 1 {
		t.Fatalf("after disable_after = %+v, want disabled, the pending callout dead-lettered", doc)
	}
	_, body = p.call(t, http.MethodGet, "/v1/callouts/"+pending.ID, nil, nil)
	if d := statusDoc(t, body); d.State != "dead_lettered" || d.DeadLetterReason != "endpoint_disabled" {
		t.Errorf("pending callout = %+v, want a dead letter with reason endpoint_disabled", d)
	}
	resp, body = p.call(t, http.MethodGet, "/callout/flaky-api/status/200", nil, nil)
	wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.EndpointDisabled, policy.Rejected)
	resp, body = p.call(t, http.MethodPost, "/callout/flaky-api/status/201", strings.NewReader(`{}`), keyed("auto-2", false))
	wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.EndpointDisabled, policy.Rejected)
	if n := strings.Count(p.logs.String(), `"msg":"outage began"`); n != 1 {
		t.Errorf("%d outage-began log lines for one outage, want 1", n)
	}
	if got := metricValue(t, p, "callout_breaker_transitions_total", `endpoint="flaky-api"`, `to="disabled"`); got != 1 {
		t.Errorf("callout_breaker_transitions_total{to=disabled} = %v, want 1", got)
	}

	adminAction(t, p, "/admin/v1/endpoints/flaky-api/enable")
	resp, body = p.call(t, http.MethodGet, "/callout/flaky-api/status/200", nil, nil)
	wantUpstream(t, resp, body, http.StatusOK, policy.Success)
}
