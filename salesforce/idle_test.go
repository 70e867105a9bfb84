package salesforce

import (
	"testing"
	"time"
)

// TestIdlePollingCost counts the API calls an idle org costs for a day of
// polling at the default interval (1 minute), on the injected clock: the
// Discarded and the reprocess polls share one Composite call, so 1,440 a
// day (deploy/bench/BENCHMARKS.md "Idle Salesforce API calls"), and a
// second replica, which does not hold the poll lock, adds none.
func TestIdlePollingCost(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated day of polls")
	}
	e := newEnv(t)
	_, a := e.replica("replica-a", newCounting(e.replays("replica-a")))
	_, b := e.replica("replica-b", newCounting(e.replays("replica-b")))
	if a.every != time.Minute {
		t.Fatalf("poll interval %v, want the default 1m", a.every)
	}
	start := e.emu.APICalls()
	for range 24 * 60 {
		for _, p := range []*Reprocessor{a, b} {
			if _, err := p.Poll(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		e.clk.Advance(a.every)
	}
	calls := e.emu.APICalls() - start
	t.Logf("idle API calls per day with polling: %d (%d queries)", calls, e.emu.Calls("query"))
	if calls != 24*60 {
		t.Errorf("%d API calls for a day of idle polling, want 1440 (one Composite call a minute)", calls)
	}
}
