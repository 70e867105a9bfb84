package sfsub

import (
	"context"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
)

// TestState: one replica holds the subscriber lease at a time; only the
// holder moves the stored replay id; a released or expired lease is taken
// over and the new holder resumes from the stored id; a forgotten id is
// gone. On miniredis, a real node and a real cluster (the two keys share a
// slot).
func TestState(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			topic := "/data/Failed_Callout__ChangeEvent"
			a, err := New(b.Client, topic)
			if err != nil {
				t.Fatal(err)
			}
			bs, err := New(b.Client, topic)
			if err != nil {
				t.Fatal(err)
			}
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
}
