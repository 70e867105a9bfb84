package salesforce

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
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

// TestIdleSubscriptionCost counts the API calls an idle org costs for a
// day with the Pub/Sub subscription healthy, on the injected clock: the
// first subscription's catch-up poll, then none — the server closes the
// stream every 5 minutes and the replica subscribes again, a gRPC call,
// not a REST one (deploy/bench/BENCHMARKS.md "Idle Salesforce API calls").
// A second replica, without the lease, adds none either.
func TestIdleSubscriptionCost(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated day")
	}
	se := newSubEnv(t, sfemu.PubSubOptions{StreamLifetime: 5 * time.Minute})
	a, b := se.subscriber("replica-a", nil), se.subscriber("replica-b", nil)
	ctx := ctxT(t)
	start := se.emu.APICalls()
	// The first subscription (its token, its catch-up poll) is set up before
	// the clock runs: the emulator checks the token's assertion on it.
	a.Step(ctx)
	waitFor(t, "the first stream is set up", func() bool { return se.ps.Streams() == 1 && a.Counts().Polls == 1 })
	// The first keepalive (within 270 s, "Subscribe RPC Method") carries
	// the latest replay id: once it is stored, every later stream resumes
	// after it (CUSTOM), with no catch-up poll. Waited for here, because
	// the minute steps below may outrun the emulator's view of the clock.
	se.clk.Advance(270 * time.Second)
	waitFor(t, "the first keepalive's replay id is stored", func() bool { return a.Counts().Stored == 1 })
	for range 24 * 60 {
		se.clk.Advance(time.Minute)
		a.Step(ctx)
		b.Step(ctx)
	}
	waitFor(t, "a stream is open", func() bool { // the last one may just have been closed: step again
		a.Step(ctx)
		return a.Streaming() && se.ps.Streams() == 1
	})
	calls := se.emu.APICalls() - start
	c := a.Counts()
	t.Logf("idle API calls per day with Pub/Sub: %d (%d streams opened, %d polls)", calls, c.Streams, c.Polls)
	if calls != 1 || c.Polls != 1 || c.Failed != 0 {
		t.Errorf("%d API calls, counts %+v for an idle day; want 1: the first subscription's catch-up poll only\n%s",
			calls, c, se.logs)
	}
	if n := b.Counts(); n.Streams != 0 || n.Polls != 0 {
		t.Errorf("the replica without the lease: %+v, want no stream and no poll", n)
	}
}
