package dispatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// disablerFunc is a Disabler of one function.
type disablerFunc func(ctx context.Context, endpoint, reason string) (policy.DisableResult, error)

func (f disablerFunc) AutoDisable(ctx context.Context, endpoint string, _ time.Duration, reason string) (policy.DisableResult, error) {
	return f(ctx, endpoint, reason)
}

// deadCount counts dead letters told to it (attempt.Stats).
type deadCount map[string]int

func (deadCount) Attempt(string, policy.Outcome, time.Duration) {}
func (d deadCount) DeadLetter(endpoint string, n int)           { d[endpoint] += n }

// TestAutoDisableCountsItsDeadLetters: the callouts an auto-disable turns
// into dead letters are counted for the console's charts.
func TestAutoDisableCountsItsDeadLetters(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	p := policy.Defaults()
	dead := deadCount{}
	w := &Watcher{Config: &config.Config{Policy: p}, Metrics: m, Logger: slog.New(slog.DiscardHandler), Stats: dead,
		Now: func() time.Time { return now },
		Store: disablerFunc(func(context.Context, string, string) (policy.DisableResult, error) {
			return policy.DisableResult{Newly: true, DeadLettered: []string{"a", "b", "c"}}, nil
		})}
	w.Changed(context.Background(), &config.Endpoint{Name: "pay-api"},
		policy.BreakerChange{OutageStartedAt: now.Add(-p.DisableAfter)})
	if dead["pay-api"] != 3 {
		t.Fatalf("dead letters counted %v, want pay-api 3", dead)
	}
}
