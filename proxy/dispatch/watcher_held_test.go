package dispatch

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// TestWatcherCountsTheCalloutsAResultHolds: the waiting callouts a result
// shut the gate on (BreakerChange.Held) are counted in
// callout_deferred_total by the gate that holds them; a result that held
// none adds nothing.
func TestWatcherCountsTheCalloutsAResultHolds(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w := &Watcher{Config: &config.Config{Policy: policy.Defaults()}, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ep := &config.Endpoint{Name: "pay-api"}
	w.Changed(context.Background(), ep, policy.BreakerChange{Opened: true, Held: 7, HeldBy: policy.GateBreakerOpen})
	w.Changed(context.Background(), ep, policy.BreakerChange{})
	w.Changed(context.Background(), ep, policy.BreakerChange{Held: 2, HeldBy: policy.GatePaused})
	if v := testutil.ToFloat64(m.Deferred.WithLabelValues("pay-api", "breaker_open")); v != 7 {
		t.Fatalf("deferred breaker_open = %v, want 7", v)
	}
	if v := testutil.ToFloat64(m.Deferred.WithLabelValues("pay-api", "paused")); v != 2 {
		t.Fatalf("deferred paused = %v, want 2", v)
	}
}
