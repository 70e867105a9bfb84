package salesforce

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestStorageLimitPausesTheOutbox: a record refused with
// STORAGE_LIMIT_EXCEEDED pauses every write of every replica for
// StoragePause (not a per-record retry), raises
// callout_salesforce_writes_paused{reason="storage_limit"}, and the writes
// resume by themselves once the pause ends and storage is free again.
// Another replica, which only reads the pause from Redis (and is the one
// scraped when the first restarts), reports it too, so the alert
// CalloutSalesforceStorageFull cannot clear while writes are still paused.
func TestStorageLimitPausesTheOutbox(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 5)
	e.emu.InjectRecord(sfemu.RecordFault{ExtID: ids[0], Code: "STORAGE_LIMIT_EXCEEDED",
		Message: "storage limit exceeded"})
	e.round(t)
	until, why, err := e.outbox.PausedUntil(ctxT(t))
	if err != nil || !until.Equal(e.clk.Now().Add(StoragePause)) || why != pauseStorage {
		t.Fatalf("pause until %v %q (%v), want %v storage_limit", until, why, err, e.clk.Now().Add(StoragePause))
	}
	// A replica with its own metrics that never met the refusal.
	otherMetrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewWriter(WriterOptions{API: e.client, Store: e.store, Outbox: e.outbox, Salesforce: *e.cfg.Salesforce,
		Endpoints: endpointsOf(e.cfg), DeadLetterRetention: e.cfg.Policy.DeadLetterRetention,
		Metrics: otherMetrics, Now: e.clk.Now, Rand: func() float64 { return 0.5 }, Owner: "replica-2",
		Logger: e.logger()})
	if err != nil {
		t.Fatal(err)
	}
	gauges := func(when string, want float64) {
		t.Helper()
		for name, m := range map[string]*Metrics{"the replica that met the refusal": e.metrics, "the other": otherMetrics} {
			if v := writesPaused(t, m, pauseStorage); v != want {
				t.Errorf("%s: writes_paused{storage_limit} = %v %s, want %v", name, v, when, want)
			}
			if v := writesPaused(t, m, pauseAPILimit); v != 0 {
				t.Errorf("%s: writes_paused{api_limit} = %v %s, want 0", name, v, when)
			}
		}
	}
	gauges("during the pause", 1)
	info := e.entry(policy.EntryName(policy.EntryMirror, ids[0]))
	if info.Tries != 0 {
		t.Errorf("the refused record counts %d failed tries: a full org is no fault of the record", info.Tries)
	}
	// A dead letter queued during the pause waits too, in every replica.
	late := e.deadLetters("orders", 1)
	calls := e.emu.APICalls()
	e.clk.Advance(StoragePause - time.Second)
	for _, w := range []*Writer{e.writer, other} {
		if rep, _ := w.Round(ctxT(t)); rep.Claimed != 0 {
			t.Fatalf("a round during the storage pause claimed %d entries", rep.Claimed)
		}
	}
	if got := e.emu.APICalls(); got != calls {
		t.Fatalf("%d API calls during the storage pause", got-calls)
	}
	gauges("before the pause ended", 1)
	e.clk.Advance(time.Second) // storage freed (the fault is used up); the pause ends
	e.drain()
	for _, id := range append(ids, late...) {
		e.record(id)
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("%d outbox entries left after the pause", n)
	}
	gauges("after the writes resumed", 0)
}

// writesPaused scrapes callout_salesforce_writes_paused{reason} of m.
func writesPaused(t *testing.T, m *Metrics, reason string) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 4)
	m.WritesPaused.Collect(ch)
	close(ch)
	for s := range ch {
		var pb dto.Metric
		if err := s.Write(&pb); err != nil {
			t.Fatal(err)
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "reason" && l.GetValue() == reason {
				return pb.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no writes_paused{reason=%q} sample", reason)
	return 0
}
