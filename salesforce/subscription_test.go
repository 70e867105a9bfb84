package salesforce

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestSubscriptionReprocesses: a first subscription checks the topic
// (GetTopic) and starts at LATEST after one catch-up poll; then the change events of records set to Reprocess
// Requested reach the reprocess path (one replay each, the records show
// Reprocessing) without any poll, and the stored replay id follows.
func TestSubscriptionReprocesses(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.settledDeadLetters(3)
	a := se.subscriber("replica-a", nil)
	ctx := ctxT(t)
	a.Step(ctx)
	waitFor(t, "the stream is set up", func() bool { return se.ps.Streams() == 1 && a.Counts().Polls == 1 })
	calls := se.emu.APICalls()
	for _, root := range roots {
		se.request(root)
	}
	waitFor(t, "3 replays", func() bool { return se.counter.total() == 3 })
	se.counter.wantOnce(t, roots)
	if n := se.emu.APICalls() - calls; n < 1 || n > 3 {
		t.Errorf("%d API calls for 3 change events in batches of 2, want 1 to 3 (one Composite call per batch)", n)
	}
	if n := a.Counts().Polls; n != 1 {
		t.Errorf("%d polls, want only the catch-up poll", n)
	}
	if got := se.ps.Presets(); !slices.Equal(got, []string{"LATEST"}) {
		t.Errorf("replay presets %v, want [LATEST]", got)
	}
	if topic, schema := se.ps.Calls("GetTopic"), se.ps.Calls("GetSchema"); topic != 1 || schema != 1 {
		t.Errorf("%d GetTopic and %d GetSchema calls, want 1 each (the topic checked once, one schema id)", topic, schema)
	}
	waitFor(t, "the replay id is stored", func() bool {
		id, err := se.state.ReplayID(ctx)
		return err == nil && id != nil
	})
	// The counter above counts replays as they start; the subscription
	// counts a batch once HandleChanges returned, its status writes queued.
	waitFor(t, "3 requests handled", func() bool { return a.Counts().Replayed == 3 })
	se.drain()
	se.wantReprocessing(t, roots)
}

// TestSubscriptionRestartResumes: replica A dies between handling a batch
// and storing its replay id; replica B takes over once A's lease lapses
// and resumes after the last stored replay id (CUSTOM): the batch A did
// not store comes again and is skipped by the request claims, the rest is
// handled: 6 requests, 6 replays, each exactly once, and none lost.
func TestSubscriptionRestartResumes(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.settledDeadLetters(6)
	actx, crash := context.WithCancel(ctxT(t))
	defer crash()
	a := se.subscriber("replica-a", &crashingState{State: se.state, after: 1, crash: crash})
	a.Step(actx)
	waitFor(t, "A's stream is set up", func() bool { return se.ps.Streams() == 1 && a.Counts().Polls == 1 })
	for _, root := range roots {
		se.request(root)
	}
	waitFor(t, "A died", func() bool { return !a.Streaming() && se.ps.Streams() == 0 })
	// A stored the first batch and handled the second (1 or 2 events each:
	// at most 2 are requested at a time) without storing it.
	if n := se.counter.total(); n < 2 || n > 4 {
		t.Fatalf("A replayed %d requests before it died, want 2 to 4 (two batches, the second not stored)", n)
	}
	b := se.subscriber("replica-b", nil)
	ctx := ctxT(t)
	b.Step(ctx)
	if b.Streaming() {
		t.Fatal("B subscribed while A's lease had not lapsed")
	}
	se.mini.FastForward(SubscriptionLease)
	b.Step(ctx)
	waitFor(t, "6 replays", func() bool { return se.counter.total() == 6 })
	waitFor(t, "B handled every event", func() bool { return b.Counts().Events >= 4 }) // the 4 to 5 after the stored id
	// B asked for more as its last full batch arrived; the server must
	// count that FetchRequest before the clock moves ReprocessLease (a
	// minute): a stream with none pending a minute after its last
	// FetchResponse is closed, and B would subscribe again.
	waitFor(t, "the server counts B's next FetchRequest", func() bool { return se.ps.Pending() > 0 })
	// B looks again, once, at the requests it found claimed (A's, done).
	se.clk.Advance(ReprocessLease)
	b.Step(ctx)
	se.drain()
	se.counter.wantOnce(t, roots)
	se.wantReprocessing(t, roots)
	if got := se.ps.Presets(); !slices.Equal(got, []string{"LATEST", "CUSTOM"}) {
		t.Errorf("replay presets %v, want [LATEST CUSTOM]: B resumes after the stored replay id", got)
	}
	if n := b.Counts().Polls; n != 0 {
		t.Errorf("B polled %d times, want none: it resumed from the stored replay id", n)
	}
}

// TestSubscriptionOneSubscriber: of two replicas stepping at once, one
// holds the lease and subscribes; the other neither subscribes nor polls.
func TestSubscriptionOneSubscriber(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	a, b := se.subscriber("replica-a", nil), se.subscriber("replica-b", nil)
	ctx := ctxT(t)
	for range 3 {
		a.Step(ctx)
		b.Step(ctx)
		se.clk.Advance(SubscriptionLease / 3)
	}
	waitFor(t, "one stream", func() bool { return se.ps.Streams() == 1 })
	if !a.Streaming() || b.Streaming() {
		t.Fatalf("streaming: a %v, b %v; want a only", a.Streaming(), b.Streaming())
	}
	if n := se.ps.Calls("Subscribe"); n != 1 {
		t.Errorf("%d Subscribe calls, want 1", n)
	}
	if n := b.Counts().Polls; n != 0 {
		t.Errorf("b polled %d times, want none", n)
	}
}

// TestSubscriptionFallbackPoll: when the stream fails (the service
// closes it and refuses the next two subscriptions), the holder polls —
// at most once a poll interval — and a request made meanwhile is
// reprocessed by the poll; once a subscription succeeds again the polls
// stop: ten minutes cost no API call.
func TestSubscriptionFallbackPoll(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.deadLetters("orders", 1)
	se.drain()
	a := se.subscriber("replica-a", nil)
	ctx := ctxT(t)
	a.Step(ctx)
	waitFor(t, "the stream is set up", func() bool { return se.ps.Streams() == 1 })
	se.setStatus(roots[0], policy.RecordNew)
	waitFor(t, "a replay id is stored", func() bool {
		id, err := se.state.ReplayID(ctx)
		return err == nil && id != nil
	})
	se.clk.Advance(time.Minute)
	se.ps.FailSubscribes(2)
	se.ps.CloseStreams()
	waitFor(t, "the stream failed", func() bool { return !a.Streaming() })
	se.request(roots[0])
	calls := se.emu.APICalls()
	a.Step(ctx) // polls: the stream is down
	if n := se.emu.APICalls() - calls; n != 1 {
		t.Fatalf("%d API calls after the stream failed, want 1 (the fallback poll)", n)
	}
	if n := se.counter.count(roots[0]); n != 1 {
		t.Fatalf("the request made while the stream was down was replayed %d times, want 1 (by the poll)", n)
	}
	for range 3 { // two refused subscriptions, then one that holds
		se.clk.Advance(SubscribeBackoffMax)
		a.Step(ctx)
		waitFor(t, "the subscription attempt ended or holds", func() bool {
			return !a.Streaming() || se.ps.Streams() == 1
		})
		if !a.Streaming() {
			a.Step(ctx) // the fallback poll, when due
		}
	}
	waitFor(t, "the stream is back", func() bool { return a.Streaming() && se.ps.Streams() == 1 })
	c := a.Counts()
	if c.Failed != 3 || c.Polls < 2 {
		t.Fatalf("counts %+v, want 3 failed streams and fallback polls while they failed", c)
	}
	// The new stream resumes after the stored replay id: the request's
	// event comes again (its claim is done: looked at again once, later).
	waitFor(t, "the request's event came again", func() bool { return a.Counts().Events >= 2 })
	se.drain()
	se.clk.Advance(ReprocessLease)
	a.Step(ctx)
	if n := se.counter.count(roots[0]); n != 1 {
		t.Fatalf("the request was replayed %d times, want 1", n)
	}
	calls = se.emu.APICalls()
	for range 10 {
		se.clk.Advance(time.Minute)
		a.Step(ctx)
	}
	if n := se.emu.APICalls() - calls; n != 0 {
		t.Errorf("%d API calls in 10 minutes with the stream back, want 0: the fallback poll stops", n)
	}
}

// TestSubscriptionExpiredReplayID: a stored replay id older than the
// retention window is refused (INVALID_ARGUMENT, replayid.corrupted); the
// subscription forgets it, polls once to catch up and subscribes at
// LATEST, and later events are handled again.
func TestSubscriptionExpiredReplayID(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.deadLetters("orders", 2)
	se.drain()
	ctx := ctxT(t)
	a := se.subscriber("replica-a", nil)
	a.Step(ctx)
	waitFor(t, "the stream is set up", func() bool { return se.ps.Streams() == 1 })
	se.request(roots[0])
	waitFor(t, "the first replay", func() bool { return se.counter.total() == 1 })
	waitFor(t, "the replay id is stored", func() bool {
		id, err := se.state.ReplayID(ctx)
		return err == nil && id != nil
	})
	a.stop()
	waitFor(t, "the stream ended", func() bool { return se.ps.Streams() == 0 })
	se.clk.Advance(73 * time.Hour)
	se.drain() // writes Reprocessing: a change event newer than the stored id
	b := se.subscriber("replica-b", nil)
	se.mini.FastForward(SubscriptionLease)
	b.Step(ctx)
	waitFor(t, "the refused stream ended", func() bool { return !b.Streaming() })
	if id, err := se.state.ReplayID(ctx); err != nil || id != nil {
		t.Fatalf("stored replay id %x (%v) after the refusal, want none", id, err)
	}
	b.Step(ctx)
	waitFor(t, "the new stream is set up", func() bool { return se.ps.Streams() == 1 })
	// The emulator counts the stream before B's goroutine marks itself
	// streaming; a Step in between would also run the fallback poll of a
	// replica without a stream (a second poll).
	waitFor(t, "B streams", b.Streaming)
	// A's catch-up poll 73 hours ago holds the poll lock still (miniredis's
	// clock did not move): B's catch-up poll waits for it, and counts as
	// done only once it ran.
	if n := b.Counts().Polls; n != 0 {
		t.Fatalf("B polled %d times while A held the poll lock, want 0", n)
	}
	se.mini.FastForward(2 * time.Minute)
	b.Step(ctx)
	if n := b.Counts().Polls; n != 1 {
		t.Fatalf("B polled %d times once the lock lapsed, want 1 (the catch-up poll)", n)
	}
	se.request(roots[1])
	waitFor(t, "the second replay", func() bool { return se.counter.count(roots[1]) == 1 })
	if got := se.ps.Presets(); !slices.Equal(got, []string{"LATEST", "CUSTOM", "LATEST"}) {
		t.Errorf("replay presets %v, want [LATEST CUSTOM LATEST]", got)
	}
}

// TestSubscriptionLatestAfterEarlyFailure: a first stream that fails before
// any batch or keepalive stores no replay id; the next stream subscribes at
// LATEST again after a second catch-up poll, not at EARLIEST, so the 170
// change events of the last 72 hours that predate the process ("Event
// Message Durability") are not delivered again.
func TestSubscriptionLatestAfterEarlyFailure(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.deadLetters("orders", 150)
	se.drain()
	for _, r := range roots[:20] {
		se.setStatus(r, policy.RecordDiscarded)
	}
	if n := se.ps.Published(ChangeEventTopic); n != 170 {
		t.Fatalf("%d change events published before the process, want 170", n)
	}
	se.clk.Advance(time.Hour)
	a := se.subscriber("replica-a", nil)
	ctx := ctxT(t)
	a.Step(ctx)
	waitFor(t, "the stream is set up", func() bool { return se.ps.Streams() == 1 && a.Counts().Polls == 1 })
	se.ps.CloseStreams() // a network failure before any batch or keepalive
	waitFor(t, "the stream ended", func() bool { return !a.Streaming() })
	if c := a.Counts(); c.Failed != 1 {
		t.Fatalf("counts %+v after the failure, want 1 failed stream", c)
	}
	se.clk.Advance(2 * time.Second)
	a.Step(ctx)
	waitFor(t, "the second stream is set up", func() bool { return se.ps.Streams() == 1 })
	if id, err := se.state.ReplayID(ctx); err != nil || id != nil {
		t.Fatalf("stored replay id %x (%v) before the second catch-up poll ran, want none", id, err)
	}
	se.mini.FastForward(2 * time.Minute) // no poll lock left over
	a.Step(ctx)
	waitFor(t, "the second catch-up poll", func() bool { return a.Counts().Polls >= 2 })
	if got := se.ps.Presets(); !slices.Equal(got, []string{"LATEST", "LATEST"}) {
		t.Errorf("replay presets %v, want [LATEST LATEST]", got)
	}
	se.request(roots[0])
	waitFor(t, "the new request's change event", func() bool { return a.Counts().Events >= 1 })
	waitFor(t, "the new request's replay", func() bool { return se.counter.count(roots[0]) == 1 })
	if c := a.Counts(); c.Events != 1 {
		t.Errorf("%d change events handled after the failure, want 1 (the new request; none of the 170 older ones)", c.Events)
	}
}
