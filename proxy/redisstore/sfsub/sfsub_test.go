package sfsub

import (
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// topic is the change-event topic the tests subscribe to.
const topic = "/data/Failed_Callout__ChangeEvent"

// newState is a State of topic on rdb; it fails the test on an error.
func newState(t *testing.T, rdb redis.UniversalClient) *State {
	t.Helper()
	s, err := New(rdb, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestState: one replica holds the subscriber lease at a time; only the
// holder moves the stored replay id; a released or expired lease is taken
// over and the new holder resumes from the stored id; a forgotten id is
// gone. On miniredis, a real node and a real cluster (the two keys share a
// slot).
func TestState(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		ctx := storetest.Ctx(t)
		a := newState(t, b.Client)
		bs := newState(t, b.Client)
		if id, err := a.ReplayID(ctx); err != nil || id != nil {
			t.Fatalf("replay id before any subscription = %q, %v; want none", id, err)
		}
		if ok, err := a.Hold(ctx, "replica-a", time.Minute); err != nil || !ok {
			t.Fatalf("a takes the free lease: %v, %v", ok, err)
		}
		if ok, err := a.Hold(ctx, "replica-a", time.Minute); err != nil || !ok {
			t.Fatalf("a renews its lease: %v, %v", ok, err)
		}
		if ok, err := bs.Hold(ctx, "replica-b", time.Minute); err != nil || ok {
			t.Fatalf("b takes a held lease: %v, %v", ok, err)
		}
		first := []byte{0, 0, 0, 0, 0, 0, 0x1f, 0xff, 0}
		if ok, err := a.SaveReplayID(ctx, "replica-a", first); err != nil || !ok {
			t.Fatalf("the holder saves: %v, %v", ok, err)
		}
		if ok, err := bs.SaveReplayID(ctx, "replica-b", []byte{9}); err != nil || ok {
			t.Fatalf("a replica without the lease saved: %v, %v", ok, err)
		}
		if err := bs.Release(ctx, "replica-b"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := bs.Hold(ctx, "replica-b", time.Minute); ok {
			t.Fatal("a release by a non-holder freed the lease")
		}
		if err := a.Release(ctx, "replica-a"); err != nil {
			t.Fatal(err)
		}
		if ok, err := bs.Hold(ctx, "replica-b", 50*time.Millisecond); err != nil || !ok {
			t.Fatalf("b takes over the released lease: %v, %v", ok, err)
		}
		if id, err := bs.ReplayID(ctx); err != nil || string(id) != string(first) {
			t.Fatalf("the new holder resumes from %x (%v), want %x", id, err, first)
		}
		if ok, _ := a.SaveReplayID(ctx, "replica-a", []byte{1}); ok {
			t.Fatal("the old holder moved the new holder's replay id")
		}
		// b dies: its lease expires and a takes over.
		if b.Mini != nil {
			b.Mini.FastForward(time.Second)
		} else {
			time.Sleep(60 * time.Millisecond) // a real Redis expires on its own clock
		}
		if ok, err := a.Hold(ctx, "replica-a", time.Minute); err != nil || !ok {
			t.Fatalf("a takes over the expired lease: %v, %v", ok, err)
		}
		if err := a.ForgetReplayID(ctx); err != nil {
			t.Fatal(err)
		}
		if id, err := a.ReplayID(ctx); err != nil || id != nil {
			t.Fatalf("replay id after ForgetReplayID = %x, %v; want none", id, err)
		}
	})
}

// TestDeferred: deferred requests come back once their time came, oldest
// first and at most limit at a time; a look moves them a lease later (a
// replica that dies mid-look leaves them to the next), Done forgets them,
// and another State over the same Redis (a new subscriber after a
// failover) sees them. Held follows the lease.
func TestDeferred(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		ctx := storetest.Ctx(t)
		a := newState(t, b.Client)
		t0 := time.UnixMilli(1_800_000_000_000)
		clk := t0
		now := func() time.Time { return clk }
		a.PinScriptTime(now)
		if err := a.Defer(ctx, []string{"a2"}, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := a.Defer(ctx, []string{"a1", "a3"}, time.Second); err != nil {
			t.Fatal(err)
		}
		if ids, err := a.Due(ctx, time.Minute, 10); err != nil || len(ids) != 0 {
			t.Fatalf("due before their time: %v, %v", ids, err)
		}
		clk = t0.Add(2 * time.Second)
		ids, err := a.Due(ctx, time.Minute, 2)
		if err != nil || !slices.Equal(ids, []string{"a1", "a3"}) {
			t.Fatalf("due at +2s, limit 2: %v, %v; want [a1 a3]", ids, err)
		}
		// The replica that took a1 and a3 dies: a new one sees a2 now,
		// a1 and a3 a lease later.
		bs := newState(t, b.Client)
		bs.PinScriptTime(now)
		clk = t0.Add(3 * time.Second)
		if ids, err := bs.Due(ctx, time.Minute, 10); err != nil ||
			!slices.Equal(ids, []string{"a2"}) {
			t.Fatalf("due at +3s after a failover: %v, %v; want [a2]", ids, err)
		}
		if err := bs.Done(ctx, []string{"a2", "a1"}); err != nil {
			t.Fatal(err)
		}
		clk = t0.Add(time.Hour)
		if ids, err := bs.Due(ctx, time.Hour, 10); err != nil ||
			!slices.Equal(ids, []string{"a3"}) {
			t.Fatalf("due an hour later: %v, %v; want [a3] (a1, a2 done)", ids, err)
		}
		if held, err := a.Held(ctx); err != nil || held {
			t.Fatalf("held before any Hold: %v, %v", held, err)
		}
		if ok, err := a.Hold(ctx, "replica-a", time.Minute); err != nil || !ok {
			t.Fatalf("hold: %v, %v", ok, err)
		}
		if held, err := bs.Held(ctx); err != nil || !held {
			t.Fatalf("held after a's Hold: %v, %v", held, err)
		}
	})
}

// TestDeferredFollowsRedisClock: deferred requests are timed on Redis's
// clock (TIME), whatever the replicas' own clocks say (contract §1): the
// State takes durations, so a request deferred for a minute by one
// replica 90 s ahead of Redis is neither due at once nor late by the skew
// on another 90 s behind (no replica's instant reaches a script). On a
// real node and a real cluster.
func TestDeferredFollowsRedisClock(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		if b.Mini != nil {
			continue // miniredis's TIME is the host's clock, not a server's
		}
		t.Run(b.Name, func(t *testing.T) {
			ctx := storetest.Ctx(t)
			s := newState(t, b.Client)
			redisNow := func() int64 {
				tm, err := b.Client.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				return tm.UnixMilli()
			}
			before := redisNow()
			if err := s.Defer(ctx, []string{"later", "now"}, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := s.Defer(ctx, []string{"now"}, 0); err != nil {
				t.Fatal(err)
			}
			after := redisNow()
			score := b.Client.ZScore(ctx, keyspace.SFSubAgain(topic), "later").Val()
			if int64(score) < before+60_000 || int64(score) > after+60_000 {
				t.Fatalf("deferred a minute: due at %d ms, want Redis's now + 60000 in [%d, %d]",
					int64(score), before+60_000, after+60_000)
			}
			// Another replica, whatever its clock says, takes only the one
			// due on Redis's clock and moves it a lease ahead on it.
			other := newState(t, b.Client)
			if ids, err := other.Due(ctx, 2*time.Minute, 10); err != nil || !slices.Equal(ids, []string{"now"}) {
				t.Fatalf("due: %v, %v; want [now] only", ids, err)
			}
			if at := int64(b.Client.ZScore(ctx, keyspace.SFSubAgain(topic), "now").Val()); at < before+120_000 || at > redisNow()+120_000 {
				t.Fatalf("taken: due again at %d ms, want Redis's now + 120000 (from %d)", at, before+120_000)
			}
		})
	}
}
