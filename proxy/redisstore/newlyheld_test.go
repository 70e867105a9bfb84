package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestResultCountsTheCalloutsItHolds: the result that opens the breaker,
// and the one that begins a pause, report how many waiting callouts they
// shut the gate on (once: the next result, the gate already shut, reports
// none), for callout_deferred_total.
func TestResultCountsTheCalloutsItHolds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		mustEnqueue(t, s, "held-api", 3)
		// openBreaker fails 20 callouts one by one, each rescheduled: the
		// 20th result shuts the gate on the 3 and on the 19 before it (the
		// 20th itself is held by its own completion, counted apart).
		res := openBreaker(t, e, s, "held-api", 20)
		if !res.Breaker.Opened || res.Breaker.Held != 22 || res.Breaker.HeldBy != policy.GateBreakerOpen ||
			res.State != policy.Held {
			t.Fatalf("the opening result = %+v, %s; want 22 held by breaker_open, itself held", res.Breaker, res.State)
		}
		again, err := s.RecordResult(ctxT(t), "held-api", policy.ReadResult{CountsTowardBreaker: true,
			PausedUntil: e.clk.Now().Add(time.Minute)})
		if err != nil || again.Held != 0 {
			t.Fatalf("a result behind an open breaker = %+v, %v; want none held anew", again, err)
		}

		mustEnqueue(t, s, "pause-api", 2)
		ch, err := s.RecordResult(ctxT(t), "pause-api", policy.ReadResult{PausedUntil: e.clk.Now().Add(time.Minute)})
		if err != nil || ch.Held != 2 || ch.HeldBy != policy.GatePaused {
			t.Fatalf("the pausing read = %+v, %v; want 2 held by paused", ch, err)
		}
		ch, _ = s.RecordResult(ctxT(t), "pause-api", policy.ReadResult{PausedUntil: e.clk.Now().Add(2 * time.Minute)})
		if ch.Held != 0 {
			t.Fatalf("extending the pause held %d more", ch.Held)
		}
	})
}
