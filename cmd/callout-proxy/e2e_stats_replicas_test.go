//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestE2EChartCountsAcrossReplicas runs two processes of the real binary on
// one real Redis: each counts its own attempts, and either one's admin API
// serves the sum (docs/console.md "Charts"). The second one is stopped right
// after its attempts: what it counted is written by its periodic write or,
// at the latest, by the one it makes on its way out.
func TestE2EChartCountsAcrossReplicas(t *testing.T) {
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
	req, _ := http.NewRequest(http.MethodGet, adminURL+"/admin/v1/endpoints/"+endpoint+"/stats?range=1h", nil)
	req.Header.Set("Authorization", "Bearer "+testEnv()["TEST_VIEWER_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc api.EndpointStatsDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stats: %d %v", resp.StatusCode, err)
	}
	return doc
}
