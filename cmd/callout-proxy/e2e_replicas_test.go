//go:build unix

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// replicaBinary builds this command's binary for a test that runs it as
// several processes on one redis-server of its own (proctest.StartRedis).
// Such a test is skipped on the embedded store alone
// (proctest.SkipOnEmbeddedStore): it runs with the real-Redis suite.
func replicaBinary(t *testing.T) string {
	t.Helper()
	proctest.SkipOnEmbeddedStore(t)
	bin, err := proctest.BuildBinary(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// replica runs the binary bin as a separate process on config yaml
// with testEnv's environment (proctest.StartProxy: it gets SIGTERM when the
// test ends and must exit 0) and returns it as a proxyUnderTest (URL,
// AdminURL, logs; its stop is not used).
func replica(t *testing.T, bin, yaml string) *proxyUnderTest {
	t.Helper()
	p := proctest.StartProxy(t, bin, yaml, proctest.ProxyOptions{Env: testEnv(), CleanExit: true})
	return &proxyUnderTest{URL: p.URL, AdminURL: p.AdminURL, logs: &p.Logs}
}

// timedUpstream is an upstream whose answer the test switches, recording
// when each request arrived and in which phase.
type timedUpstream struct {
	*proctest.Upstream
	mu      sync.Mutex
	phase   string
	byPhase map[string][]time.Time // phase -> arrival times
	reply   map[string]func(w http.ResponseWriter)
}

// newTimedUpstream starts one with the given replies per phase; the first
// phase is start.
func newTimedUpstream(t *testing.T, start string, reply map[string]func(w http.ResponseWriter)) *timedUpstream {
	u := &timedUpstream{phase: start, byPhase: map[string][]time.Time{}, reply: reply}
	u.Upstream = proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		u.mu.Lock()
		ph := u.phase
		u.byPhase[ph] = append(u.byPhase[ph], time.Now())
		u.mu.Unlock()
		u.reply[ph](w)
	})
	return u
}

// set switches the phase.
func (u *timedUpstream) set(phase string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.phase = phase
}

// arrivals is a copy of the arrival times of phase.
func (u *timedUpstream) arrivals(phase string) []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.byPhase[phase]...)
}

// answerStatus answers code at once.
func answerStatus(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

// rawGet sends GET url with the Authorization value and returns the status,
// the Callout-Outcome and problem type ("" for an upstream answer). It is
// safe to call from any goroutine (no t.Fatal).
func rawGet(url, authorization string) (status int, outcome, problemType string, err error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Authorization", authorization)
	resp, err := noRedirectClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", "", err
	}
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		var pb struct{ Type string }
		_ = json.Unmarshal(body, &pb)
		problemType = pb.Type
	}
	return resp.StatusCode, resp.Header.Get("Callout-Outcome"), problemType, nil
}

// untilTime sleeps until at (waiting for an interval to pass, not an
// assertion).
func untilTime(at time.Time) { time.Sleep(time.Until(at)) }

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
	up := proctest.NewUpstream(t, failHandler)
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

// TestE2EChartCountsAcrossReplicas runs two processes of the real binary on
// one real Redis: each counts its own attempts, and either one's admin API
// serves the sum (docs/console.md "Charts"). The second one is stopped right
// after its attempts: what it counted is written by its periodic write or,
// at the latest, by the one it makes on its way out.
func TestE2EChartCountsAcrossReplicas(t *testing.T) {
	t.Parallel()
	bin := replicaBinary(t)
	redisURL := proctest.StartRedis(t, false).URL
	up := proctest.NewUpstream(t, failHandler)
	cfg := devConfig(proctest.Endpoint("echo-api", up.URL, loopbackNets)) + "redis:\n  url: " + redisURL + "\n"
	reps := proctest.StartReplicas(t, bin, 2, cfg, testEnv())
	authz := bearer(t, testIssuer)
	for range 3 {
		if code, _, _, err := rawGet(reps[0].URL+"/callout/echo-api/ok", authz); err != nil || code != 200 {
			t.Fatalf("read through r0 = %d %v", code, err)
		}
	}
	for range 2 {
		if code, _, _, err := rawGet(reps[1].URL+"/callout/echo-api/fail", authz); err != nil || code != 503 {
			t.Fatalf("read through r1 = %d %v", code, err)
		}
	}
	reps[1].Signal(syscall.SIGTERM, 30*time.Second)
	// Wait (a bound, not a measurement) for r0's periodic write.
	deadline := time.Now().Add(30 * time.Second)
	var doc api.EndpointStatsDoc
	for {
		doc = statsOf(t, reps[0].AdminURL, "echo-api")
		if doc.Total.Success == 3 && doc.Total.Retryable == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if doc.Total.Success != 3 || doc.Total.Retryable != 2 || doc.Total.Permanent != 0 || len(doc.Points) != 60 {
		t.Fatalf("echo-api over 1h = %+v (%d points), want 3 success and 2 retryable of both replicas, 60 points",
			doc.Total, len(doc.Points))
	}
}

// statsOf reads GET /admin/v1/endpoints/{endpoint}/stats from adminURL as
// the viewer.
func statsOf(t *testing.T, adminURL, endpoint string) api.EndpointStatsDoc {
	t.Helper()
	var doc api.EndpointStatsDoc
	proctest.GetJSON(t, http.DefaultClient, adminURL+"/admin/v1/endpoints/"+endpoint+"/stats?range=1h",
		"Bearer "+testEnv()["TEST_VIEWER_TOKEN"], &doc)
	return doc
}
