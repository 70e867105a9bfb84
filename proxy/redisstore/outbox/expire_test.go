package outbox

import (
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// expireAll runs Expire on every shard with a due copy and returns the
// roots marked Expired, sorted.
func expireAll(t *testing.T, o *Outbox) []string {
	t.Helper()
	return overShards(t, o.ExpiryShards, func(n int) []string {
		got, err := o.Expire(ctxT(t), n, 100)
		if err != nil {
			t.Fatal(err)
		}
		return got
	})
}

// gone deletes a callout's keys, as their TTL would (the tests' clock is
// not the server's).
func gone(t *testing.T, e *env, ids ...string) {
	t.Helper()
	for _, id := range ids {
		key, _ := keyspace.Callout(id)
		if err := e.B.Client.Del(ctxT(t), keyspace.RecordParts(key)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOutboxExpire walks the expiry check of contract §7 without keyspace
// notifications: nothing happens before the copy's expiry time; a copy
// still present is checked again when its TTL ends; a copy that is gone
// marks its record Expired once, unless a later replay chain is the
// record's copy or the record is Reprocessed or Discarded.
func TestOutboxExpire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s, o := e.outboxStore()
		ids, _ := scheduledDeadLetters(t, s, "payments", 4)
		plain, replayed, reprocessed, discarded := ids[0], ids[1], ids[2], ids[3]
		claimAll(t, o)
		// The replayed record's latest copy is a replay chain that
		// dead-lettered later (its own copy expires later).
		chain, _ := scheduledDeadLetters(t, s, "payments", 1)
		claimAll(t, o)
		mustStatus(t, o, replayed, policy.StatusChange{Status: "Failed Again", Replay: chain[0], Copy: chain[0]})
		mustStatus(t, o, reprocessed, policy.StatusChange{Status: policy.RecordReprocessed, Replay: "x"})
		mustStatus(t, o, discarded, policy.StatusChange{Status: policy.RecordDiscarded})
		claimAll(t, o)

		e.Clk.Advance(30*day - time.Second)
		if got := expireAll(t, o); len(got) != 0 {
			t.Fatalf("expired before their time: %v", got)
		}
		e.Clk.Advance(time.Second)
		// plain is still there (its TTL was extended): checked again later.
		gone(t, e, replayed, reprocessed, discarded)
		if got := expireAll(t, o); len(got) != 0 {
			t.Fatalf("expired %v; none is the latest copy of a live record", got)
		}
		if at, ok, _ := o.ExpiresAt(ctxT(t), plain); !ok || !at.After(e.Clk.Now()) {
			t.Errorf("a copy still present must be checked again later, got %v %v", at, ok)
		}
		for _, id := range []string{reprocessed, discarded} {
			if st, _ := o.RecordState(ctxT(t), id); st != (policy.RecordState{}) {
				t.Errorf("state of final record %s kept: %+v", id, st)
			}
		}
		gone(t, e, plain, chain[0])
		e.Clk.Advance(30 * day)
		want := []string{plain, replayed}
		slices.Sort(want)
		if got := expireAll(t, o); !slices.Equal(got, want) {
			t.Fatalf("expired %v, want %v", got, want)
		}
		if got := expireAll(t, o); len(got) != 0 {
			t.Errorf("expired twice: %v", got)
		}
		if got, want := claimAll(t, o), sorted(names(policy.EntryStatus, plain, replayed)); !slices.Equal(got, want) {
			t.Errorf("queued %v, want %v", got, want)
		}
		if st, _ := o.RecordState(ctxT(t), replayed); st.Status != policy.RecordExpired || st.Replay != chain[0] {
			t.Errorf("state of %s = %+v, want Expired", replayed, st)
		}
		if root, _ := o.RootOf(ctxT(t), chain[0]); root != "" {
			t.Errorf("link of the expired chain kept: %q", root)
		}
	})
}

func mustStatus(t *testing.T, o *Outbox, root string, ch policy.StatusChange) {
	t.Helper()
	if _, err := o.SetRecordStatus(ctxT(t), root, ch); err != nil {
		t.Fatal(err)
	}
}

func TestOutboxKeysShareTheEndpointSlot(t *testing.T) {
	for _, ep := range []string{"payments", "erp", "a"} {
		n := keyspace.ShardOf(ep)
		ep := keyspace.Endpoint(ep)
		ok := keyspace.OutboxOf(n)
		for _, key := range []string{ok.Due, ok.Data, ok.Expiry, ok.State} {
			if keyspace.Slot(key) != keyspace.Slot(ep) {
				t.Errorf("%s: slot %d, endpoint hash %d", key, keyspace.Slot(key), keyspace.Slot(ep))
			}
		}
		if p := keyspace.ShardPrefix(n); ok.Due != p+"sfo" || ok.Expiry != p+"sfx" {
			t.Errorf("%s: outbox keys are not the documented cp:{sN}:sfo and cp:{sN}:sfx: %+v", ep, ok)
		}
	}
}

func TestEntryNames(t *testing.T) {
	id, _ := keyspace.NewCalloutID("payments", fixedReader{})
	for _, tc := range []struct {
		name  string
		shard int
		ok    bool
	}{
		{policy.EntryName(policy.EntryMirror, id), keyspace.ShardOf("payments"), true},
		{policy.EntryName(policy.EntryOutage, "payments", id), keyspace.ShardOf("payments"), true},
		{policy.EntryName(policy.EntryDisabled, "erp", "1700000000000"), keyspace.ShardOf("erp"), true},
		{policy.EntryName(policy.EntryStatus, "not-an-id"), 0, false},
		{"m:", 0, false},
	} {
		n, ok := EntryShard(tc.name)
		if n != tc.shard || ok != tc.ok {
			t.Errorf("EntryShard(%q) = %d %v, want %d %v", tc.name, n, ok, tc.shard, tc.ok)
		}
	}
	kind, keys := policy.SplitEntry(policy.EntryName(policy.EntryOutage, "payments", id))
	if kind != policy.EntryOutage || !slices.Equal(keys, []string{"payments", id}) {
		t.Errorf("policy.SplitEntry = %q %q", kind, keys)
	}
}

type fixedReader struct{}

func (fixedReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

func TestOutboxPauseAndWatermark(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		_, o := e.outboxStore()
		if u, why, err := o.PausedUntil(ctxT(t)); err != nil || !u.IsZero() || why != "" {
			t.Fatalf("paused until = %v %q %v, want zero", u, why, err)
		}
		until := t0.Add(15 * time.Minute)
		if err := o.Pause(ctxT(t), until, "storage_limit"); err != nil {
			t.Fatal(err)
		}
		if u, why, err := o.PausedUntil(ctxT(t)); err != nil || !u.Equal(until) || why != "storage_limit" {
			t.Errorf("paused until = %v %q %v, want %v storage_limit", u, why, err, until)
		}
		if w, err := o.Watermark(ctxT(t), "discarded"); err != nil || !w.IsZero() {
			t.Fatalf("watermark = %v %v", w, err)
		}
		if err := o.SetWatermark(ctxT(t), "discarded", t0); err != nil {
			t.Fatal(err)
		}
		if w, _ := o.Watermark(ctxT(t), "discarded"); !w.Equal(t0) {
			t.Errorf("watermark = %v, want %v", w, t0)
		}
	})
}
