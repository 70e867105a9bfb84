package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// scheduledDeadLetters enqueues n callouts of endpoint, claims them as a
// dispatcher does and ends each as a dead letter; it returns their ids and
// which completions were told to notify the owner.
func scheduledDeadLetters(t *testing.T, s *redisstore.Store, endpoint string, n int) (ids []string, notified []string) {
	t.Helper()
	mustEnqueue(t, s, endpoint, n)
	for _, cl := range mustClaim(t, s, endpoint, policy.ClaimOptions{Batch: n, Lease: testLease}).Claimed {
		ids = append(ids, cl.ID)
		if mustComplete(t, s, cl, deadCompletion(policy.DeadLetterExhausted)).NotifyOwner {
			notified = append(notified, cl.ID)
		}
	}
	if len(ids) != n {
		t.Fatalf("claimed %d of %d", len(ids), n)
	}
	return ids, notified
}

// claimAll claims every due entry of every shard, settles each as done,
// and returns their names, sorted.
func claimAll(t *testing.T, o *Outbox) []string {
	t.Helper()
	return overShards(t, o.DueShards, func(n int) []string {
		got, err := o.Claim(ctxT(t), n, 1000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, len(got))
		acks := make([]policy.OutboxAck, len(got))
		for i, e := range got {
			names[i] = e.Name
			acks[i] = policy.OutboxAck{Name: e.Name, Verdict: policy.VerdictDone}
		}
		if len(got) > 0 {
			if _, err := o.Ack(ctxT(t), n, got[0].Lease, acks); err != nil {
				t.Fatal(err)
			}
		}
		return names
	})
}

// overShards runs each on every shard that shards lists and returns what
// they return, together, sorted.
func overShards(t *testing.T, shards func(context.Context) ([]int, error), each func(shard int) []string) []string {
	t.Helper()
	ns, err := shards(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range ns {
		out = append(out, each(n)...)
	}
	slices.Sort(out)
	return out
}

func names(kind string, ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = policy.EntryName(kind, id)
	}
	return out
}

func sorted(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

// TestOutboxQueuedWithTheEnding checks that each ending queues exactly its
// Salesforce writes in the completing script: a scheduled dead letter its
// mirror, completion event and expiry check, the outage's first dead letter
// the owner notification; a scheduled success its event only; synchronous
// endings no event.
func TestOutboxQueuedWithTheEnding(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s, o := e.outboxStore()
		ids, notified := scheduledDeadLetters(t, s, "payments", 3)
		if len(notified) != 1 || notified[0] != ids[0] {
			t.Fatalf("notified %v, want the first dead letter %s", notified, ids[0])
		}
		want := sorted(names(policy.EntryMirror, ids...), names(policy.EntryResult, ids...),
			[]string{policy.EntryName(policy.EntryOutage, "payments", ids[0])})
		if got := claimAll(t, o); !slices.Equal(got, want) {
			t.Errorf("queued %v, want %v", got, want)
		}
		for _, id := range ids {
			at, ok, err := o.ExpiresAt(ctxT(t), id)
			if err != nil || !ok || !at.Equal(t0.Add(30*day)) {
				t.Errorf("expiry of %s = %v %v %v, want %v", id, at, ok, err, t0.Add(30*day))
			}
		}

		// A scheduled success: its event only.
		ok := mustEnqueue(t, s, "orders", 1)[0]
		cl := mustClaim(t, s, "orders", claimOpts).Claimed[0]
		mustComplete(t, s, cl, success())
		// Synchronous endings (Begin): a success queues nothing, a dead
		// letter its mirror and expiry check but no event.
		sync := func(c policy.Completion) string {
			r, err := s.Begin(ctxT(t), req("orders"), policy.BeginOptions{Lease: testLease})
			if err != nil || r.Claimed == nil {
				t.Fatalf("begin: %v %+v", err, r)
			}
			mustComplete(t, s, r.Claimed, c)
			return r.Claimed.ID
		}
		sync(success())
		// The synchronous dead letter's failure began an outage on orders:
		// its owner is told, as for any first dead letter of an outage.
		amb := sync(deadCompletion(policy.DeadLetterAmbiguous))
		want = sorted([]string{policy.EntryName(policy.EntryResult, ok), policy.EntryName(policy.EntryMirror, amb),
			policy.EntryName(policy.EntryOutage, "orders", amb)})
		if got := claimAll(t, o); !slices.Equal(got, want) {
			t.Errorf("queued %v, want %v", got, want)
		}
	})
}

func TestOutboxQueuedByDisable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s, o := e.outboxStore()
		ids := mustEnqueue(t, s, "erp", 2)
		res, err := s.Disable(ctxT(t), "erp", "auto")
		if err != nil || !res.Newly || len(res.DeadLettered) != 2 {
			t.Fatalf("disable: %+v %v", res, err)
		}
		if _, err := s.Disable(ctxT(t), "erp", "again"); err != nil {
			t.Fatal(err)
		}
		disabled := policy.EntryName(policy.EntryDisabled, "erp", ms(t0))
		want := sorted(names(policy.EntryMirror, ids...), names(policy.EntryResult, ids...), []string{disabled})
		if got := claimAll(t, o); !slices.Equal(got, want) {
			t.Errorf("queued %v, want %v (one notification per disable)", got, want)
		}
	})
}

func TestOutboxOffQueuesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		o := e.outbox()
		scheduledDeadLetters(t, s, "payments", 2)
		mustEnqueue(t, s, "payments", 1)
		if _, err := s.Disable(ctxT(t), "payments", "auto"); err != nil {
			t.Fatal(err)
		}
		if n, err := o.Len(ctxT(t)); err != nil || n != 0 {
			t.Errorf("outbox len = %d %v, want 0", n, err)
		}
		e.Clk.Advance(31 * day)
		if shards, err := o.ExpiryShards(ctxT(t)); err != nil || len(shards) != 0 {
			t.Errorf("expiry shards = %v %v, want none", shards, err)
		}
	})
}

func TestOutboxClaimLeaseAndAck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		_, o := e.outboxStore()
		a, b, c := policy.EntryName("n", "erp", "1"), policy.EntryName("n", "erp", "2"), policy.EntryName("n", "erp", "3")
		if n, err := o.Put(ctxT(t), t0, Item{a, "pa"}, Item{b, ""}, Item{c, "pc"}); err != nil || n != 3 {
			t.Fatalf("put = %d %v", n, err)
		}
		if n, _ := o.Put(ctxT(t), t0, Item{a, "other"}); n != 0 {
			t.Fatalf("second put of %s added %d", a, n)
		}
		shard := keyspace.ShardOf("erp")
		first, err := o.Claim(ctxT(t), shard, 10, time.Minute)
		if err != nil || len(first) != 3 || first[0].Payload != "pa" || first[1].Payload != "" {
			t.Fatalf("claim = %+v %v", first, err)
		}
		if again, _ := o.Claim(ctxT(t), shard, 10, time.Minute); len(again) != 0 {
			t.Fatalf("leased entries claimed again: %+v", again)
		}
		e.Clk.Advance(time.Minute)
		second, err := o.Claim(ctxT(t), shard, 10, time.Minute)
		if err != nil || len(second) != 3 || !second[0].Lease.After(first[0].Lease) {
			t.Fatalf("claim after the lease = %+v %v", second, err)
		}
		stale, err := o.Ack(ctxT(t), shard, first[0].Lease, []policy.OutboxAck{{Name: a, Verdict: policy.VerdictDone}})
		if err != nil || stale != 1 {
			t.Fatalf("ack with the old lease: stale %d %v, want 1", stale, err)
		}
		retryAt, deferAt := e.Clk.Now().Add(time.Hour), e.Clk.Now().Add(2*time.Hour)
		stale, err = o.Ack(ctxT(t), shard, second[0].Lease, []policy.OutboxAck{
			{Name: a, Verdict: policy.VerdictDone},
			{Name: b, Verdict: policy.VerdictRetry, At: retryAt, Error: "UNABLE_TO_LOCK_ROW", SetPayload: true, Payload: "pb"},
			{Name: c, Verdict: policy.VerdictDefer, At: deferAt},
		})
		if err != nil || stale != 0 {
			t.Fatalf("ack: stale %d %v", stale, err)
		}
		for _, tc := range []struct {
			name string
			ok   bool
			want Info
		}{
			{a, false, Info{}},
			{b, true, Info{Due: retryAt, Payload: "pb", Tries: 1, LastError: "UNABLE_TO_LOCK_ROW"}},
			{c, true, Info{Due: deferAt, Payload: "pc"}},
		} {
			got, ok, err := o.Entry(ctxT(t), tc.name)
			if err != nil || ok != tc.ok || !got.Due.Equal(tc.want.Due) || got.Payload != tc.want.Payload ||
				got.Tries != tc.want.Tries || got.LastError != tc.want.LastError {
				t.Errorf("entry %s = %+v %v %v, want %+v %v", tc.name, got, ok, err, tc.want, tc.ok)
			}
		}
		if n, _ := o.Len(ctxT(t)); n != 2 {
			t.Errorf("len = %d, want 2", n)
		}
	})
}

// TestOutboxRecordWriteFencedOnVersion: a status change made while the
// record's write is under way makes the done write due again, so the newer
// status is written too; Forget drops the state with the last write.
func TestOutboxRecordWriteFencedOnVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s, o := e.outboxStore()
		ids, _ := scheduledDeadLetters(t, s, "payments", 1)
		root := ids[0]
		shard, _ := keyspace.ShardOfID(root)
		claimAll(t, o) // the dead letter's own entries
		set := func(status string, at time.Time) bool {
			ok, err := o.SetRecordStatus(ctxT(t), root, policy.StatusChange{Status: status, At: at, Write: true})
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		set("Reprocessing", t0)
		st, _ := o.RecordState(ctxT(t), root)
		claimed, err := o.Claim(ctxT(t), shard, 10, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].Name != policy.EntryName(policy.EntryStatus, root) {
			t.Fatalf("claim = %+v %v", claimed, err)
		}
		if !set("Failed Again", t0.Add(time.Second)) || set("Reprocessing", t0.Add(-time.Second)) {
			t.Fatal("a newer change must apply and an older one must not")
		}
		done := policy.OutboxAck{Name: claimed[0].Name, Verdict: policy.VerdictDone, Root: root, Version: st.Version}
		if _, err := o.Ack(ctxT(t), claimed[0].Shard, claimed[0].Lease, []policy.OutboxAck{done}); err != nil {
			t.Fatal(err)
		}
		again, _ := o.Claim(ctxT(t), claimed[0].Shard, 10, time.Minute)
		cur, _ := o.RecordState(ctxT(t), root)
		if len(again) != 1 || cur.Status != "Failed Again" || cur.Version != st.Version+1 {
			t.Fatalf("after a stale-version done: claimed %+v, state %+v", again, cur)
		}
		done = policy.OutboxAck{Name: again[0].Name, Verdict: policy.VerdictDone, Root: root, Version: cur.Version, Forget: true}
		if _, err := o.Ack(ctxT(t), again[0].Shard, again[0].Lease, []policy.OutboxAck{done}); err != nil {
			t.Fatal(err)
		}
		if n, _ := o.Len(ctxT(t)); n != 0 {
			t.Errorf("len = %d after the last write", n)
		}
		if st, _ := o.RecordState(ctxT(t), root); st != (policy.RecordState{}) {
			t.Errorf("state after Forget = %+v", st)
		}
	})
}
