//go:build unix

package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestE2EGateCacheAcrossReplicas runs two processes of the real binary on
// one real Redis: replica B answers reads to a healthy
// endpoint from its gate cache (no Redis round trip: its hit counter
// grows), the breaker opens through replica A, and as soon as the
// gate-change message has reached B (its message counter says so) B
// refuses reads with 503 breaker-open and Retry-After, the upstream
// untouched. gate_staleness is 10 s here, so B's backstop poll (every 5 s)
// is not what tells it: the message is.
func TestE2EGateCacheAcrossReplicas(t *testing.T) {
	t.Parallel()
	bin := replicaBinary(t)
	redisURL := proctest.StartRedis(t, false).URL
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	cfg := devConfig(proctest.Endpoint("gate-api", up.URL, loopbackNets, singleTenant, "breaker_failures: 3",
		"breaker_probe_interval: 1m")) + "redis:\n  url: " + redisURL + "\n  gate_staleness: 10s\n"
	a, b := replica(t, bin, cfg), replica(t, bin, cfg)
	authz := bearer(t, testIssuer)
	read := func(p *proxyUnderTest, path string) (int, string) {
		t.Helper()
		code, out, typ, err := rawGet(p.URL+"/callout/gate-api"+path, authz)
		if err != nil {
			t.Fatal(err)
		}
		if typ != "" {
			return code, typ
		}
		return code, out
	}
	hits := func() float64 { return metricValue(t, b, "callout_gate_cache_reads_total", `result="hit"`) }
	messages := func() float64 { return unlabelledMetric(t, b, "callout_gate_cache_messages_total") }

	// B reads until two of its reads were answered from memory (the first
	// asks Redis; the cache starts with the process).
	pollUntil(t, 10*time.Second, "B answered reads from its gate cache", func() bool {
		if code, out := read(b, "/ok"); code != 200 || out != string(policy.Success) {
			t.Fatalf("B's read of the healthy endpoint = %d %s", code, out)
		}
		return hits() >= 2
	})
	before := messages()
	for i := range 3 {
		if code, out := read(a, "/fail"); code != 503 || out != string(policy.Retryable) {
			t.Fatalf("A's failing read %d = %d %s, want the upstream's 503", i, code, out)
		}
	}
	// Two messages: the first failure (the count left 0) and the opening.
	pollUntil(t, 10*time.Second, "B heard both gate changes", func() bool { return messages() >= before+2 })
	okHits := up.HitsFor("/ok")
	for i := range 3 {
		resp, body := b.call(t, http.MethodGet, "/callout/gate-api/ok", nil, authHeader(authz))
		wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.BreakerOpen, policy.Rejected)
		if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Fatalf("B's refusal %d has Retry-After %q, want the seconds until the probe", i, ra)
		}
	}
	if n := up.HitsFor("/ok"); n != okHits {
		t.Fatalf("the upstream got %d reads through B after the opening, want none", n-okHits)
	}
	if doc := endpointDoc(t, b.AdminURL, "gate-api"); doc.Breaker != "open" {
		t.Fatalf("B's admin view = %+v, want open", doc)
	}
}

// unlabelledMetric is the value of the /metrics sample name, which has no
// labels, read from p's admin listener; it fails the test when absent.
func unlabelledMetric(t *testing.T, p *proxyUnderTest, name string) float64 {
	t.Helper()
	v, ok := proctest.Sample(t, metricsText(t, p), name)
	if !ok {
		t.Fatalf("no %s on %s/metrics", name, p.AdminURL)
	}
	return v
}
