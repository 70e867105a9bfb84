package outbox

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Redis's clock decides the outbox's shared state (contract §1,
// ARCHITECTURE.md "One clock"): two outboxes whose own clocks are 90 s
// ahead of and behind Redis's, neither pinned, agree on every lease, due
// time, deferral, pause and status stamp, because the scripts read TIME and
// the outboxes pass durations only.

// skewedOutbox is an outbox whose own clock is Redis's shifted by skew,
// with scripts reading TIME (PinScriptTime off: how production runs).
func skewedOutbox(e *env, skew time.Duration) *Outbox {
	return New(e.B.Client, Options{Now: func() time.Time { return time.Now().Add(skew) },
		DeadLetterRetention: 30 * day})
}

func TestLeasesAndDueTimesFollowRedisClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ahead, behind := skewedOutbox(e, 90*time.Second), skewedOutbox(e, -90*time.Second)
		const tol = 5 * time.Second // the test's own round trips, never the skew
		ctx := ctxT(t)
		root, _ := keyspace.NewCalloutID("clock-api", fixedReader{})
		name := policy.EntryName(policy.EntryStatus, root)
		n, _ := EntryShard(name)

		// Queued by the replica behind "now" is due at Redis's now: the
		// replica ahead claims it, under a lease measured on Redis's clock,
		// and the lease Claim reports is the score it wrote.
		if _, err := behind.Put(ctx, behind.now(), Item{Name: name}); err != nil {
			t.Fatal(err)
		}
		got, err := ahead.Claim(ctx, n, 10, testLease)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim by the replica ahead = %+v, %v; want the entry", got, err)
		}
		redistest.Within(t, "lease end", got[0].Lease, e.B.Now(t).Add(testLease), tol)
		if info, _, _ := ahead.Entry(ctx, name); !info.Due.Equal(got[0].Lease) {
			t.Fatalf("stored lease %v, claim reported %v", info.Due, got[0].Lease)
		}
		// The replica ahead by 90 s would see a 30 s lease as long over on
		// its own clock; Redis's says it holds, so neither claims it again.
		for who, o := range map[string]*Outbox{"ahead": ahead, "behind": behind} {
			if again, err := o.Claim(ctx, n, 10, testLease); err != nil || len(again) != 0 {
				t.Fatalf("claim by the replica %s during the lease = %+v, %v", who, again, err)
			}
		}

		// A retry set by the replica behind 10 s from its now is due 10 s
		// after Redis's now, not 80 s before it; the ack fences on the lease.
		retry := policy.OutboxAck{Name: name, Verdict: policy.VerdictRetry, At: behind.now().Add(10 * time.Second)}
		if stale, err := behind.Ack(ctx, n, got[0].Lease, []policy.OutboxAck{retry}); err != nil || stale != 0 {
			t.Fatalf("ack = %d stale, %v", stale, err)
		}
		info, _, err := ahead.Entry(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		redistest.Within(t, "retry due time", info.Due, e.B.Now(t).Add(10*time.Second), tol)
		if again, err := ahead.Claim(ctx, n, 10, testLease); err != nil || len(again) != 0 {
			t.Fatalf("the replica ahead claimed a retry due in 10 s: %+v, %v", again, err)
		}

		// The flush lease taken by the replica behind holds against the
		// replica ahead for its whole length on Redis's clock.
		if ok, err := behind.AcquireFlush(ctx, "behind", testLease); err != nil || !ok {
			t.Fatalf("flush lease by the replica behind = %v, %v", ok, err)
		}
		if ok, err := ahead.AcquireFlush(ctx, "ahead", testLease); err != nil || ok {
			t.Fatalf("the replica ahead took a fresh flush lease: %v, %v", ok, err)
		}

		// Deferrals and the pause end as long after Redis's now as the
		// replica asked, whatever its own clock says.
		d, err := ahead.Defer(ctx, "", func(int) time.Time { return ahead.now().Add(time.Minute) })
		if err != nil {
			t.Fatal(err)
		}
		redistest.Within(t, "deferral end", d.Until, e.B.Now(t).Add(time.Minute), tol)
		if err := behind.Pause(ctx, behind.now().Add(time.Minute), "api_limit"); err != nil {
			t.Fatal(err)
		}
		till, _, err := ahead.PausedUntil(ctx)
		if err != nil {
			t.Fatal(err)
		}
		redistest.Within(t, "pause end", till, e.B.Now(t).Add(time.Minute), tol)

		// A status change without an event time is stamped with Redis's now.
		if _, err := ahead.SetRecordStatus(ctx, root, policy.StatusChange{Status: policy.RecordReprocessing}); err != nil {
			t.Fatal(err)
		}
		st, err := behind.RecordState(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		redistest.Within(t, "status stamp", st.At, e.B.Now(t), tol)
	})
}
