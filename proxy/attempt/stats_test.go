package attempt

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// countingStats records what a Runner told it.
type countingStats struct {
	attempts []policy.Outcome
	took     []time.Duration
	dead     int
}

func (c *countingStats) Attempt(endpoint string, o policy.Outcome, d time.Duration) {
	c.attempts, c.took = append(c.attempts, o), append(c.took, d)
}
func (c *countingStats) DeadLetter(endpoint string, n int) { c.dead += n }

// TestStatsSeeEveryAttemptAndDeadLetter: the console's counts hear of
// every attempt Observe classifies (the read path's too) and every dead
// letter DeadLettered accounts for.
func TestStatsSeeEveryAttemptAndDeadLetter(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStats{}
	r := &Runner{Config: &config.Config{Log: config.Log{Access: config.LogAccessNone}}, Metrics: m,
		Logger: slog.New(slog.DiscardHandler), Stats: st}
	ep := &config.Endpoint{Name: "pay"}
	ctx := context.Background()
	r.Observe(ctx, ep, "c1", 1, policy.KindFirst, forward.Attempt{Response: &forward.Response{Status: 503}, Duration: 40 * time.Millisecond})
	r.Observe(ctx, ep, "", 1, policy.KindFirst, forward.Attempt{Response: &forward.Response{Status: 200}, Duration: time.Millisecond})
	r.DeadLettered(ctx, ep, "c1", policy.CompleteResult{Reason: policy.DeadLetterExhausted})
	if len(st.attempts) != 2 || st.attempts[0] != policy.Retryable || st.attempts[1] != policy.Success ||
		st.took[0] != 40*time.Millisecond || st.dead != 1 {
		t.Fatalf("stats heard %v %v and %d dead letters; want retryable 40ms, success, 1", st.attempts, st.took, st.dead)
	}
}
