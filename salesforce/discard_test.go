package salesforce

import (
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDiscardBeforeMirror: a dead letter an admin discards (Store.Discard,
// DELETE /admin/v1/dead-letters/{id}) before its mirror is sent takes its
// queued mirror and expiry check with it: nothing is counted as dropped (no
// CalloutSalesforceWritesDropped page), no record is written for it, not
// even an empty Expired one at its retention's end, and its completion
// event still reaches the Apex waiter (docs/salesforce.md "Discarding a dead
// letter").
func TestDiscardBeforeMirror(t *testing.T) {
	e := newEnv(t)
	ids := e.quietDeadLetters(3)
	if err := e.store.Discard(ctxT(t), ids[0]); err != nil {
		t.Fatal(err)
	}
	e.drain()
	for _, kind := range []string{"m", "e"} {
		if n := testutil.ToFloat64(e.metrics.WritesDropped.WithLabelValues(kind)); n != 0 {
			t.Errorf("writes_dropped_total{kind=%q} = %v after a discard, want 0", kind, n)
		}
	}
	if n := strings.Count(e.logs.String(), "the write is dropped"); n != 0 {
		t.Errorf("%d dropped-write log lines after a discard", n)
	}
	if _, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, ids[0]); ok {
		t.Error("the discarded dead letter was mirrored")
	}
	events := map[string]int{}
	for _, ev := range e.emu.Events(CalloutResultEvent) {
		events[ev["Callout_Id__c"].(string)]++
	}
	for _, id := range ids {
		if events[id] != 1 {
			t.Errorf("callout %s: %d completion events, want 1", id, events[id])
		}
	}
	if _, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, ids[1]); !ok {
		t.Error("a dead letter not discarded was not mirrored")
	}
	e.clk.Advance(e.cfg.Policy.DeadLetterRetention + time.Hour)
	e.mini.FastForward(e.cfg.Policy.DeadLetterRetention + time.Hour)
	if _, err := e.writer.SweepExpired(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if r, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, ids[0]); ok {
		t.Errorf("the discarded dead letter became a record without content: %v", r)
	}
	if r := e.record(ids[1]); r["Status__c"] != "Expired" {
		t.Errorf("a dead letter not discarded: status %v at its retention's end, want Expired", r["Status__c"])
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("%d outbox entries left", n)
	}
}

// TestDiscardReplayChainBeforeMirror: a replay chain's dead letter
// discarded before its mirror is sent keeps that mirror, which writes its
// root's record (Failed Again), so nothing is dropped and the root does not
// stay Reprocessing (docs/salesforce.md "Discarding a dead letter").
func TestDiscardReplayChainBeforeMirror(t *testing.T) {
	e := newEnv(t)
	root := e.settledDeadLetters(1)[0]
	e.statusChanged(root, policy.RecordReprocessing)
	e.drain()
	e.clk.Advance(time.Minute)
	chain := e.scheduled("orders", 1, replayOf(root), failed503(policy.ActionDeadLetter, policy.DeadLetterExhausted))[0]
	if err := e.store.Discard(ctxT(t), chain); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if r := e.record(root); r["Status__c"] != policy.RecordFailedAgain || r["Replay_Callout_Id__c"] != chain {
		t.Errorf("root after its chain's dead letter was discarded: %v, want Failed Again by %s", r, chain)
	}
	if n := testutil.ToFloat64(e.metrics.WritesDropped.WithLabelValues("m")); n != 0 {
		t.Errorf("writes_dropped_total{kind=\"m\"} = %v, want 0", n)
	}
}
