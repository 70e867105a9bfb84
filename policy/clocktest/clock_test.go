package clocktest

import (
	"context"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	c := New(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now = %v, want %v", c.Now(), t0)
	}
	c.Advance(time.Minute)
	if err := c.Sleep(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Minute + 2*time.Second); !c.Now().Equal(want) || c.Slept() != 2*time.Second {
		t.Fatalf("Now = %v slept %v, want %v and 2s", c.Now(), c.Slept(), want)
	}
	c.Set(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Set: Now = %v", c.Now())
	}
}

func TestGateBlocksTheSleepThatReachesIt(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	c := New(t0)
	blocked, release := c.GateAt(t0.Add(3 * time.Second))
	if err := c.Sleep(context.Background(), time.Second); err != nil { // before the gate
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Sleep(context.Background(), 5*time.Second) }()
	<-blocked
	if !c.Now().Equal(t0.Add(time.Second)) {
		t.Fatalf("the gated Sleep advanced before release: %v", c.Now())
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !c.Now().Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("Now = %v after release", c.Now())
	}
	ctx, cancel := context.WithCancel(context.Background())
	blocked, _ = c.GateAt(c.Now())
	go func() { done <- c.Sleep(ctx, time.Second) }()
	<-blocked
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("canceled gated Sleep = %v", err)
	}
}
