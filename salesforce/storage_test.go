package salesforce

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestStorageLimitPausesTheOutbox: a record refused with
// STORAGE_LIMIT_EXCEEDED pauses every write of every replica for
// StoragePause (not a per-record retry), raises
// callout_salesforce_writes_paused{reason="storage_limit"}, and the writes
// resume by themselves once the pause ends and storage is free again.
func TestStorageLimitPausesTheOutbox(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 5)
	e.emu.InjectRecord(sfemu.RecordFault{ExtID: ids[0], Code: "STORAGE_LIMIT_EXCEEDED",
		Message: "storage limit exceeded"})
	if _, err := e.writer.Round(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	until, err := e.outbox.PausedUntil(ctxT(t))
	if err != nil || !until.Equal(e.clk.Now().Add(StoragePause)) {
		t.Fatalf("pause until %v (%v), want %v", until, err, e.clk.Now().Add(StoragePause))
	}
	gauge := e.metrics.WritesPaused.WithLabelValues(pauseStorage)
	if v := testutil.ToFloat64(gauge); v != 1 {
		t.Fatalf("writes_paused{storage_limit} = %v during the pause, want 1", v)
	}
	info := e.entry(policy.EntryName(policy.EntryMirror, ids[0]))
	if info.Tries != 0 {
		t.Errorf("the refused record counts %d failed tries: a full org is no fault of the record", info.Tries)
	}
	// A dead letter queued during the pause waits too, in every replica.
	late := e.deadLetters("orders", 1)
	calls := e.emu.APICalls()
	other := e.newWriter()
	e.clk.Advance(StoragePause - time.Second)
	for _, w := range []*Writer{e.writer, other} {
		if rep, _ := w.Round(ctxT(t)); rep.Claimed != 0 {
			t.Fatalf("a round during the storage pause claimed %d entries", rep.Claimed)
		}
	}
	if got := e.emu.APICalls(); got != calls {
		t.Fatalf("%d API calls during the storage pause", got-calls)
	}
	e.writer.gauge(ctxT(t))
	if v := testutil.ToFloat64(gauge); v != 1 {
		t.Fatalf("writes_paused{storage_limit} = %v before the pause ended, want 1", v)
	}
	e.clk.Advance(time.Second) // storage freed (the fault is used up); the pause ends
	e.drain()
	for _, id := range append(ids, late...) {
		e.record(id)
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("%d outbox entries left after the pause", n)
	}
	e.writer.gauge(ctxT(t))
	if v := testutil.ToFloat64(gauge); v != 0 {
		t.Errorf("writes_paused{storage_limit} = %v after the writes resumed, want 0", v)
	}
}
