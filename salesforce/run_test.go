package salesforce

import (
	"context"
	"testing"
	"time"
)

// TestRunWritesWhenWoken: Run writes what is queued when woken (as the
// dispatcher does after an ending), polls Discarded records once at start,
// and returns when its context ends.
func TestRunWritesWhenWoken(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		e.writer.Run(ctx)
		close(done)
	}()
	ids := e.deadLetters("orders", 3)
	e.clk.Advance(e.cfg.Salesforce.BatchLinger) // the batch's linger ends
	e.writer.Wake()
	deadline := time.After(10 * time.Second)
	for len(e.emu.Records(FailedCalloutObject)) < len(ids) || e.emu.Calls("query") == 0 {
		select {
		case <-deadline:
			t.Fatalf("Run wrote %d of %d records, polled %d times", len(e.emu.Records(FailedCalloutObject)),
				len(ids), e.emu.Calls("query"))
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
