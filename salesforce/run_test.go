package salesforce

import (
	"context"
	"testing"
	"time"
)

// TestRunWritesWhenWoken: Run writes what is queued when woken (as the
// dispatcher does after an ending) and returns when its context ends. It
// polls nothing: the Reprocessor polls Discarded records with the reprocess
// poll, in one call.
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
	for len(e.emu.Records(FailedCalloutObject)) < len(ids) {
		select {
		case <-deadline:
			t.Fatalf("Run wrote %d of %d records", len(e.emu.Records(FailedCalloutObject)), len(ids))
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if n := e.emu.Calls("query"); n != 0 {
		t.Errorf("Run queried Salesforce %d times: the Reprocessor polls", n)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
