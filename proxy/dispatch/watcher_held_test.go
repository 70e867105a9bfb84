package dispatch

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
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

// TestWatcherQuietResultAllocatesNothing: a result that changed nothing
// (a success on a closed breaker, the common case) costs the watcher no
// allocation; one that opened the breaker still logs.
func TestWatcherQuietResultAllocatesNothing(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	w := &Watcher{Config: &config.Config{Policy: policy.Defaults()}, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	ep := &config.Endpoint{Name: "pay-api"}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { w.Changed(ctx, ep, policy.BreakerChange{ConsecutiveFailures: 0}) }); n != 0 {
		t.Errorf("a quiet result allocates %v times, want 0", n)
	}
	if logged.Len() != 0 {
		t.Fatalf("a quiet result logged %q", logged.String())
	}
	w.Changed(ctx, ep, policy.BreakerChange{Opened: true, ConsecutiveFailures: 5})
	if !strings.Contains(logged.String(), "circuit breaker opened") {
		t.Fatalf("an opening logged %q, want the breaker opened line", logged.String())
	}
}
