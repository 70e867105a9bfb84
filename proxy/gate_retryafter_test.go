package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGateRetryAfter is contract §4's "breaker open: 503 rejected,
// Retry-After = seconds until the next probe" and §3's pause, on the rig's
// clock: a read opens the breaker (one failure opens it, the probe 300 s
// later) or pauses the endpoint (a 429 asking for 2 h, held to
// retry_after_cap, 1 h); 100 s on, a read is refused with Retry-After the
// seconds left — of the caller's own organisation's partition where the
// breaker is partitioned, of the endpoint's breaker where it is not.
func TestGateRetryAfter(t *testing.T) {
	const breaker = "    breaker_failures: 1\n    breaker_probe_interval: 5m\n"
	for _, tt := range []struct {
		name, extra string
		issuers     []string
		status      int // the upstream's answer to the first read
		code        string
		retryAfter  int
	}{
		{"endpoint breaker", "    breaker: {partition: endpoint}\n" + breaker, nil, http.StatusServiceUnavailable,
			"breaker-open", 200},
		{"the organisation's partition", breaker, []string{"https://other.my.salesforce.com"},
			http.StatusServiceUnavailable, "breaker-open", 200},
		{"429 pause, capped at retry_after_cap", "", nil, http.StatusTooManyRequests, "endpoint-paused", 3500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rig := &clockRig{}
			rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7200")
				w.WriteHeader(tt.status)
			}, extra: tt.extra, issuers: tt.issuers})
			if first := rig.do(t, http.MethodGet, "/callout/api/v1/status", nil, ""); first.Code != tt.status {
				t.Fatalf("first read: %d %s, want the upstream's %d", first.Code, first.Body, tt.status)
			}
			rig.clock.Advance(100 * time.Second)
			got := rig.do(t, http.MethodGet, "/callout/api/v1/status", nil, "")
			h := got.Header()
			if got.Code != http.StatusServiceUnavailable || h.Get("Callout-Problem") != tt.code ||
				h.Get("Callout-Outcome") != "rejected" || h.Get("Retry-After") != strconv.Itoa(tt.retryAfter) {
				t.Errorf("read 100 s on: %d %v %s, want 503 %s, rejected, Retry-After %d",
					got.Code, h, got.Body, tt.code, tt.retryAfter)
			}
			if !strings.Contains(got.Body.String(), " in "+strconv.Itoa(tt.retryAfter)+" s") {
				t.Errorf("detail %s, want the same %d s", got.Body, tt.retryAfter)
			}
		})
	}
}
