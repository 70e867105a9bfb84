package outbox

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// TestFlushLease: one replica holds the flush lease at a time, by the
// injected clock; its holder renews and gives it back; a lease whose
// holder died ends by itself.
func TestFlushLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		_, o := e.outboxStore()
		ctx := ctxT(t)
		take := func(owner string) bool {
			t.Helper()
			ok, err := o.AcquireFlush(ctx, owner, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !take("a") || take("b") || !take("a") {
			t.Fatal("want a to take and renew the lease, b refused")
		}
		if err := o.ReleaseFlush(ctx, "b"); err != nil || take("b") {
			t.Fatalf("b gave back a's lease (%v)", err)
		}
		if err := o.ReleaseFlush(ctx, "a"); err != nil || !take("b") {
			t.Fatalf("after a gave it back b did not get it (%v)", err)
		}
		e.Clk.Advance(time.Minute - time.Millisecond)
		if take("a") {
			t.Fatal("a took b's lease before it ended")
		}
		e.Clk.Advance(time.Millisecond)
		if !take("a") {
			t.Fatal("b's lease did not end by itself")
		}
	})
}

// TestDeferrals: failed calls in a row are counted per scope and hold the
// writes back until the time the caller computed from the count; clearing
// one scope leaves the others.
func TestDeferrals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		_, o := e.outboxStore()
		ctx := ctxT(t)
		step := func(fails int) time.Time { return t0.Add(time.Duration(fails) * time.Second) }
		for want := 1; want <= 3; want++ {
			d, err := o.Defer(ctx, "", step)
			if err != nil || d.Fails != want || !d.Until.Equal(step(want)) {
				t.Fatalf("defer %d: %+v %v", want, d, err)
			}
		}
		if _, err := o.Defer(ctx, "Failed_Callout__c", step); err != nil {
			t.Fatal(err)
		}
		defs, err := o.Deferrals(ctx)
		if err != nil || defs[""].Fails != 3 || !defs[""].Until.Equal(step(3)) || defs["Failed_Callout__c"].Fails != 1 {
			t.Fatalf("deferrals = %+v %v", defs, err)
		}
		if err := o.ClearDeferral(ctx, ""); err != nil {
			t.Fatal(err)
		}
		defs, _ = o.Deferrals(ctx)
		if _, ok := defs[""]; ok || defs["Failed_Callout__c"].Fails != 1 {
			t.Errorf("after clearing \"\": %+v", defs)
		}
	})
}

// TestDueStats counts the due entries of every shard (not those claimed
// or due later) and finds the longest-waiting one.
func TestDueStats(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s, o := e.outboxStore()
		ctx := ctxT(t)
		if n, oldest, err := o.DueStats(ctx); err != nil || n != 0 || !oldest.IsZero() {
			t.Fatalf("empty outbox: %d %v %v", n, oldest, err)
		}
		ids, _ := scheduledDeadLetters(t, s, "pay", 3) // m: and e: each, o: once, at t0
		e.Clk.Advance(time.Second)
		if _, err := o.Put(ctx, e.Clk.Now().Add(time.Hour), Item{Name: policy.EntryName(policy.EntryStatus, ids[0])}); err != nil {
			t.Fatal(err)
		}
		n, oldest, err := o.DueStats(ctx)
		if err != nil || n != 7 || !oldest.Equal(t0) {
			t.Fatalf("due = %d since %v (%v), want 7 since %v", n, oldest, err, t0)
		}
		shard, _ := keyspace.ShardOfID(ids[1])
		if got, err := o.Claim(ctx, shard, 1000, time.Minute); err != nil || len(got) == 0 {
			t.Fatalf("claim: %v", err)
		}
		if n2, _, _ := o.DueStats(ctx); n2 >= n {
			t.Errorf("claimed entries still counted as due: %d", n2)
		}
	})
}

// TestRecordAnswered: a status change that answers an admin's request
// keeps the request's stamp (the latest), even when the change itself is
// older than the record's status; the stamp goes with the record's state.
func TestRecordAnswered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		_, o := e.outboxStore()
		ctx := ctxT(t)
		root := mustEnqueue(t, e.store(), "pay", 1)[0]
		stamp := t0.Add(time.Minute)
		if _, err := o.SetRecordStatus(ctx, root, policy.StatusChange{Status: "Reprocessing", At: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ok, err := o.SetRecordStatus(ctx, root, policy.StatusChange{Status: "Failed Again", At: t0, Answers: stamp})
		if err != nil || ok {
			t.Fatalf("older change applied (%v %v)", ok, err)
		}
		if _, err := o.SetRecordStatus(ctx, root, policy.StatusChange{Status: "Reprocessed", At: t0.Add(2 * time.Hour),
			Answers: t0}); err != nil {
			t.Fatal(err)
		}
		st, err := o.RecordState(ctx, root)
		if err != nil || st.Status != "Reprocessed" || !st.Answered.Equal(stamp) {
			t.Fatalf("state = %+v %v, want Reprocessed answering %v", st, err, stamp)
		}
	})
}
