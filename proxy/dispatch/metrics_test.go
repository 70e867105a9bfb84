package dispatch_test

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestMetricsAfterScenarios runs four endings side by side on a fresh
// registry — a flaky upstream that succeeds on attempt 3, a dead one that
// exhausts 3 attempts, one that refuses (403) and an `idempotency: ignored`
// one that never answers — and checks the operating metrics (contract §3):
// callout_attempts_total by kind, callout_retries_scheduled_total,
// callout_dead_letters_total by reason and callout_schedule_lag_seconds.
func TestMetricsAfterScenarios(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		flaky := proctest.NewUpstream(t, sequence(503, 503, 200))
		down := proctest.NewUpstream(t, status(http.StatusBadGateway))
		refuse := proctest.NewUpstream(t, status(http.StatusForbidden))
		hang := proctest.NewUpstream(t, held(http.StatusOK))
		h := newHarness(t, b, newConfig(t, append([]string{"max_attempts: 3"}, msPolicy...),
			ep{name: "flaky", url: flaky.URL}, ep{name: "down", url: down.URL},
			ep{name: "refuse", url: refuse.URL},
			ep{name: "hang", url: hang.URL, extra: []string{"idempotency: ignored",
				"connect_timeout: 100ms", "header_timeout: 100ms", "attempt_timeout: 100ms"}}))
		d := h.dispatcher(h.store, dispatch.Options{})
		for _, name := range []string{"flaky", "down", "refuse", "hang"} {
			h.enqueue(name, http.MethodPost, "/x", "", time.Time{})
		}
		h.clk.Advance(5 * time.Second) // every first attempt is 5s late
		claims := 0
		for range 4 {
			claims += h.round(d)
			h.clk.Advance(time.Second)
		}
		if claims != 8 {
			t.Fatalf("%d claims in all, want 8 (3 + 3 + 1 + 1)", claims)
		}
		a := h.m.Attempts
		for _, c := range []struct {
			endpoint, outcome, kind string
			want                    float64
		}{
			{"flaky", "retryable", "first", 1}, {"flaky", "retryable", "retry", 1}, {"flaky", "success", "retry", 1},
			{"down", "retryable", "first", 1}, {"down", "retryable", "retry", 2},
			{"refuse", "permanent", "first", 1}, {"hang", "retryable", "first", 1},
		} {
			wantCounter(t, "attempts "+c.endpoint+" "+c.outcome+" "+c.kind,
				a.WithLabelValues(c.endpoint, c.outcome, c.kind), c.want)
		}
		wantCounter(t, "retries scheduled flaky", h.m.RetriesScheduled.WithLabelValues("flaky", "status_5xx"), 2)
		wantCounter(t, "retries scheduled down", h.m.RetriesScheduled.WithLabelValues("down", "status_5xx"), 2)
		wantCounter(t, "dead letters exhausted", h.m.DeadLetters.WithLabelValues("down", "exhausted"), 1)
		wantCounter(t, "dead letters permanent", h.m.DeadLetters.WithLabelValues("refuse", "permanent"), 1)
		wantCounter(t, "dead letters ambiguous", h.m.DeadLetters.WithLabelValues("hang", "ambiguous"), 1)
		wantCounter(t, "dead letters flaky", h.m.DeadLetters.WithLabelValues("flaky", "exhausted"), 0)

		var lag dto.Metric
		if err := h.m.ScheduleLag.Write(&lag); err != nil {
			t.Fatal(err)
		}
		// 4 first attempts 5s late; each retry is due within 4ms of its
		// failure and claimed 1s after it, so 4 retries are just under 1s late.
		count, sum := lag.GetHistogram().GetSampleCount(), lag.GetHistogram().GetSampleSum()
		if count != 8 || sum > 24 || sum < 23.98 {
			t.Errorf("schedule lag: %d samples summing %vs, want 8 summing 20s + 4 × (1s − <4ms)", count, sum)
		}
		for _, bk := range lag.GetHistogram().GetBucket() {
			want := map[float64]uint64{0.5: 0, 1: 4, 2.5: 4, 5: 8}
			if w, ok := want[bk.GetUpperBound()]; ok && bk.GetCumulativeCount() != w {
				t.Errorf("schedule lag bucket le=%v holds %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), w)
			}
		}
	})
}
