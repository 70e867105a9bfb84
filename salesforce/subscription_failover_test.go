package salesforce

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestSubscriptionDeferredSurvivesFailover: replica A's subscription
// defers three requests (the endpoint's backlog is full), stores its
// replay id past their events and dies; replica B takes over, and once the
// requests are due it replays them from the deferred set in Redis — no
// event of theirs comes again, and no poll runs.
func TestSubscriptionDeferredSurvivesFailover(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.settledDeadLetters(3)
	gate := &gateReplayer{next: se.counter, busy: true}
	actx, crash := context.WithCancel(ctxT(t))
	defer crash()
	a := se.subscriberWith("replica-a", nil, gate)
	a.Step(actx)
	waitFor(t, "A's stream is set up", func() bool { return se.ps.Streams() == 1 && a.Counts().Polls == 1 })
	for _, root := range roots {
		se.request(root)
	}
	waitFor(t, "A deferred the 3 requests and stored its replay id", func() bool {
		c := a.Counts()
		return gate.calls() == 3 && c.Events >= 3 && c.Stored == c.Batches
	})
	crash()
	waitFor(t, "A's stream ended", func() bool { return se.ps.Streams() == 0 })
	if n := se.counter.total(); n != 0 {
		t.Fatalf("%d replays while the backlog was full, want 0", n)
	}
	gate.set(false, nil) // the backlog drained; A is gone
	b := se.subscriber("replica-b", nil)
	ctx := ctxT(t)
	se.mini.FastForward(ReprocessLease) // A's lease and its request claims lapse
	se.clk.Advance(ReprocessLease)      // the deferred requests are due
	b.Step(ctx)
	if c := b.Counts(); c.Replayed != 3 {
		t.Fatalf("B replayed %d deferred requests in its first step, want 3 (from Redis): %+v", c.Replayed, c)
	}
	se.counter.wantOnce(t, roots)
	waitFor(t, "B's stream is set up", func() bool { return se.ps.Streams() == 1 })
	if got := se.ps.Presets(); !slices.Equal(got, []string{"LATEST", "CUSTOM"}) {
		t.Errorf("replay presets %v, want [LATEST CUSTOM]", got)
	}
	if n := b.Counts().Polls; n != 0 {
		t.Errorf("B polled %d times, want 0", n)
	}
	se.drain()
	se.wantReprocessing(t, roots)
}

// TestSubscriptionCatchUpRuns: replica X died mid-poll, holding the poll
// lock and the claim of a request. Replica A subscribes at LATEST; its
// catch-up poll cannot take the lock, so it stores no replay id while it
// handles a later request, and dies. Replica B subscribes at LATEST again,
// its catch-up poll runs once X's lock lapsed and finds X's claim, and it
// looks at that request again once the claim lapsed: both requests are
// replayed, once each.
func TestSubscriptionCatchUpRuns(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.settledDeadLetters(2)
	ctx := ctxT(t)
	se.request(roots[0])
	if ok, err := se.store.TryLock(ctx, "sf-poll-"+reprocessPoll, "replica-x", 45*time.Second); err != nil || !ok {
		t.Fatalf("X's poll lock: %v, %v", ok, err)
	}
	if ok, err := se.outbox.ClaimReprocess(ctx, roots[0], se.stamp(roots[0]), "replica-x", ReprocessLease); err != nil || !ok {
		t.Fatalf("X's claim: %v, %v", ok, err)
	}
	actx, crash := context.WithCancel(ctx)
	defer crash()
	a := se.subscriber("replica-a", nil)
	a.Step(actx)
	waitFor(t, "A's stream is set up", func() bool { return se.ps.Streams() == 1 })
	se.request(roots[1])
	waitFor(t, "A handled the later request", func() bool { return a.Counts().Replayed == 1 })
	if c := a.Counts(); c.Polls != 0 || c.Stored != 0 {
		t.Fatalf("A while X holds the poll lock: %+v; want no poll and no replay id stored", c)
	}
	crash()
	waitFor(t, "A's stream ended", func() bool { return se.ps.Streams() == 0 })
	if id, err := se.state.ReplayID(ctx); err != nil || id != nil {
		t.Fatalf("stored replay id %x, %v; want none", id, err)
	}
	se.mini.FastForward(45 * time.Second) // A's lease and X's lock lapse; X's claim has 15 s left
	b := se.subscriber("replica-b", nil)
	b.Step(ctx)
	waitFor(t, "B caught up", func() bool { return se.ps.Streams() == 1 && b.Counts().Polls == 1 })
	if n := se.counter.count(roots[0]); n != 0 {
		t.Fatalf("X's claimed request replayed %d times while the claim held", n)
	}
	se.mini.FastForward(ReprocessLease)
	se.clk.Advance(ReprocessLease)
	b.Step(ctx)
	se.counter.wantOnce(t, roots)
	if got := se.ps.Presets(); !slices.Equal(got, []string{"LATEST", "LATEST"}) {
		t.Errorf("replay presets %v, want [LATEST LATEST]: B had no replay id to resume from", got)
	}
}

// TestSubscriptionCrashMidBatchReplaysOnce: replica A replays a dead
// letter without an Idempotency-Key and dies before it ends the request's
// claim or queues Reprocessing. Replica B resumes after A's stored replay
// id, finds the request claimed, looks at it again once the claim lapsed,
// and answers it from the chain A made (the dead letter's replay mark):
// one replay, and the record shows that chain.
func TestSubscriptionCrashMidBatchReplaysOnce(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.settledDeadLetters(2)
	if c, err := se.store.Get(ctxT(t), roots[0]); err != nil || c.IdempotencyKey != "" {
		t.Fatalf("dead letter %+v, %v: want one without an Idempotency-Key", c, err)
	}
	actx, crash := context.WithCancel(ctxT(t))
	defer crash()
	gate := &gateReplayer{next: se.counter}
	a := se.subscriberWith("replica-a", nil, gate)
	a.Step(actx)
	waitFor(t, "A's stream is set up", func() bool { return se.ps.Streams() == 1 && a.Counts().Polls == 1 })
	se.request(roots[1])
	waitFor(t, "A handled the first request and stored its replay id", func() bool {
		return a.Counts().Replayed == 1 && a.Counts().Stored >= 1
	})
	gate.set(false, crash)
	se.request(roots[0])
	waitFor(t, "A replayed and died", func() bool { return se.counter.count(roots[0]) == 1 && se.ps.Streams() == 0 })
	b := se.subscriber("replica-b", nil)
	ctx := ctxT(t)
	se.mini.FastForward(SubscriptionLease)
	b.Step(ctx)
	waitFor(t, "B saw the request's event again", func() bool { return b.Counts().Events >= 1 })
	se.mini.FastForward(ReprocessLease)
	se.clk.Advance(ReprocessLease)
	b.Step(ctx)
	if n := se.counter.count(roots[0]); n != 1 {
		t.Fatalf("the dead letter without a key was replayed %d times, want 1", n)
	}
	if c := b.Counts(); c.Answered != 1 || c.Replayed != 0 {
		t.Errorf("B's counts %+v: want the request answered from A's chain, no replay", c)
	}
	se.drain()
	r := se.record(roots[0])
	chain, _ := r["Replay_Callout_Id__c"].(string)
	if r["Status__c"] != policy.RecordReprocessing || chain == "" || chain == roots[0] {
		t.Errorf("record %v, chain %q; want Reprocessing and A's chain", r["Status__c"], chain)
	}
}

// TestSubscriptionGapEvents: a gap event (the change event could not be
// generated) and an overflow event each make a catch-up poll run before
// the batch's replay id is stored: the request behind the gap is
// replayed by that poll; change events after it are handled as before.
func TestSubscriptionGapEvents(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.settledDeadLetters(2)
	a := se.subscriber("replica-a", nil)
	a.Step(ctxT(t))
	waitFor(t, "the stream is set up", func() bool { return se.ps.Streams() == 1 && a.Counts().Polls == 1 })
	se.ps.GapNext(1)
	se.request(roots[0]) // published as GAP_UPDATE, without Status__c
	waitFor(t, "the gap's catch-up poll replayed the request", func() bool { return se.counter.count(roots[0]) == 1 })
	waitFor(t, "the gap's batch stored", func() bool { c := a.Counts(); return c.Stored == c.Batches && c.Stored >= 1 })
	if c := a.Counts(); c.Gaps != 1 || c.Polls != 2 {
		t.Fatalf("counts %+v: want 1 gap event and 2 polls (start, gap)", c)
	}
	se.ps.PublishGap(t, FailedCalloutObject, "GAP_OVERFLOW")
	waitFor(t, "the overflow event's catch-up poll", func() bool { c := a.Counts(); return c.Gaps == 2 && c.Polls == 3 })
	se.request(roots[1])
	waitFor(t, "a change event after the gaps", func() bool { return se.counter.count(roots[1]) == 1 })
	if n := a.Counts().Polls; n != 3 {
		t.Errorf("%d polls, want 3: a change event needs none", n)
	}
}

// TestReprocessRunLeavesPollsToSubscriber: a replica with the subscription
// off (ReprocessOptions.Subscribed, Deferred) makes no poll and leaves the
// subscriber's deferred requests alone while another replica holds the
// subscriber lease; once none does, it polls again and handles the due
// deferred requests first — here one the poll's watermark has passed.
func TestReprocessRunLeavesPollsToSubscriber(t *testing.T) {
	se := newSubEnv(t, sfemu.PubSubOptions{})
	roots := se.settledDeadLetters(1)
	se.request(roots[0])
	ctx := ctxT(t)
	id, _ := se.record(roots[0])["Id"].(string)
	if err := se.state.Defer(ctx, []string{id}, 0); err != nil {
		t.Fatal(err)
	}
	if err := se.outbox.SetWatermark(ctx, reprocessPoll, se.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	w, _ := se.replica("replica-off", se.counter)
	p, err := NewReprocessor(ReprocessOptions{Writer: w, Replayer: se.counter, Requests: se.outbox, Marks: se.marks(),
		Subscribed: se.state.Held, Deferred: se.state})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := se.state.Hold(ctx, "replica-a", SubscriptionLease); err != nil || !ok {
		t.Fatalf("hold: %v, %v", ok, err)
	}
	calls := se.emu.APICalls()
	if rep, err := p.runPoll(ctx); err != nil || rep.Polled || se.emu.APICalls() != calls {
		t.Fatalf("poll beside a subscriber: %+v, %v, %d API calls; want none", rep, err, se.emu.APICalls()-calls)
	}
	se.mini.FastForward(SubscriptionLease)
	if rep, err := p.runPoll(ctx); err != nil || !rep.Polled || rep.Requests != 0 {
		t.Fatalf("poll with no subscriber: %+v, %v; want a poll that finds nothing past its watermark", rep, err)
	}
	if n := se.counter.count(roots[0]); n != 1 {
		t.Fatalf("the deferred request was replayed %d times, want 1 (from the deferred set)", n)
	}
	se.clk.Advance(time.Hour)
	if due, err := se.state.Due(ctx, time.Hour, 10); err != nil || len(due) != 0 {
		t.Fatalf("deferred set after the look: %v, %v; want it empty", due, err)
	}
}
