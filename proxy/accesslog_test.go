package proxy

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/attempt"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestAccessLog: log.access decides which attempts get an "attempt" line
// (the attempt runner's Observe, which every attempt of the read, write and
// dispatch paths goes through): all, errors — the default, also for a
// Config not built by Load — or none; every attempt is counted in the
// metrics whatever it says.
func TestAccessLog(t *testing.T) {
	ok := forward.Attempt{Response: &forward.Response{Status: 200}, Duration: 3 * time.Millisecond}
	unavailable := forward.Attempt{Response: &forward.Response{Status: 503}, Duration: 4 * time.Millisecond}
	notFound := forward.Attempt{Response: &forward.Response{Status: 404}, Duration: 5 * time.Millisecond}
	tests := []struct {
		access string
		want   []float64 // statuses logged
	}{
		{config.LogAccessAll, []float64{200, 503, 404}},
		{config.LogAccessErrors, []float64{503, 404}},
		{"", []float64{503, 404}},
		{config.LogAccessNone, nil},
	}
	for _, tt := range tests {
		t.Run("access "+tt.access, func(t *testing.T) {
			var buf proctest.LogBuffer
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			runner := &attempt.Runner{Config: &config.Config{Log: config.Log{Access: tt.access}}, Metrics: m,
				Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
			ep := &config.Endpoint{Name: "pay"}
			for _, att := range []forward.Attempt{ok, unavailable, notFound} {
				runner.Observe(context.Background(), ep, "c1", 1, policy.KindFirst, att)
			}
			recs := buf.Lines(t)
			if len(recs) != len(tt.want) {
				t.Fatalf("%d lines %v, want statuses %v", len(recs), recs, tt.want)
			}
			for i, rec := range recs {
				if rec["msg"] != "attempt" || rec["status"] != tt.want[i] || rec["endpoint"] != "pay" ||
					rec["callout_id"] != "c1" || rec["outcome"] == nil || rec["duration_ms"] == nil {
					t.Errorf("line %d = %v, want the attempt with status %v", i, rec, tt.want[i])
				}
			}
			n := testutil.ToFloat64(m.Attempts.WithLabelValues("pay", "success", "first")) +
				testutil.ToFloat64(m.Attempts.WithLabelValues("pay", "retryable", "first")) +
				testutil.ToFloat64(m.Attempts.WithLabelValues("pay", "permanent", "first"))
			if n != 3 {
				t.Errorf("callout_attempts_total{endpoint=pay} = %v, want 3 whatever log.access says", n)
			}
		})
	}
}
