package redisstore

import (
	"testing"
	"time"
)

// TestPubSubState: one replica holds the subscriber lock at a time; only
// the holder moves the stored replay id; a released lock is taken over and
// the new holder resumes from the stored id.
func TestPubSubState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		topic := "/data/Failed_Callout__ChangeEvent-" + t.Name()
		a, b := NewPubSubState(e.store(), topic), NewPubSubState(e.store(), topic)
		if id, err := a.ReplayID(ctx); err != nil || id != nil {
			t.Fatalf("replay id before any subscription = %q, %v; want none", id, err)
		}
		if ok, err := a.Hold(ctx, "replica-a", time.Minute); err != nil || !ok {
			t.Fatalf("a takes the free lock: %v, %v", ok, err)
		}
		if ok, err := a.Hold(ctx, "replica-a", time.Minute); err != nil || !ok {
			t.Fatalf("a renews its lock: %v, %v", ok, err)
		}
		if ok, err := b.Hold(ctx, "replica-b", time.Minute); err != nil || ok {
			t.Fatalf("b takes a held lock: %v, %v", ok, err)
		}
		first := []byte{0, 0, 0, 0, 0, 0, 0x1f, 0xff}
		if ok, err := a.SaveReplayID(ctx, "replica-a", first); err != nil || !ok {
			t.Fatalf("the holder saves: %v, %v", ok, err)
		}
		if ok, err := b.SaveReplayID(ctx, "replica-b", []byte{9}); err != nil || ok {
			t.Fatalf("a replica without the lock saved: %v, %v", ok, err)
		}
		if err := b.Release(ctx, "replica-b"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := b.Hold(ctx, "replica-b", time.Minute); ok {
			t.Fatal("a release by a non-holder freed the lock")
		}
		if err := a.Release(ctx, "replica-a"); err != nil {
			t.Fatal(err)
		}
		if ok, err := b.Hold(ctx, "replica-b", time.Minute); err != nil || !ok {
			t.Fatalf("b takes over the released lock: %v, %v", ok, err)
		}
		if id, err := b.ReplayID(ctx); err != nil || string(id) != string(first) {
			t.Fatalf("the new holder resumes from %x (%v), want %x", id, err, first)
		}
		if ok, _ := a.SaveReplayID(ctx, "replica-a", []byte{1}); ok {
			t.Fatal("the old holder moved the new holder's replay id")
		}
	})
}
