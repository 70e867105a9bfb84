package salesforce

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

func succeeded() policy.Completion {
	return policy.Completion{
		Action:   policy.ActionSucceed,
		Attempt:  &policy.Attempt{StartedAt: t0, Duration: 20 * time.Millisecond, Status: 201, Outcome: policy.Success},
		Response: &policy.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":7}`)},
	}
}

func replayOf(id string) func(*policy.NewCallout) {
	return func(nc *policy.NewCallout) { nc.ReplayOf = id }
}

// TestReplayStatuses walks a record's life around replays (contract §8): New;
// Reprocessing when a replay starts; Failed Again, with the chain's
// attempts, when the chain dead-letters; Reprocessed when a later chain
// succeeds. The record stays keyed on the original id.
func TestReplayStatuses(t *testing.T) {
	e := newEnv(t)
	root := e.deadLetters("orders", 1)[0]
	e.drain()
	if s := e.record(root)["Status__c"]; s != policy.RecordNew {
		t.Fatalf("status = %v, want New", s)
	}

	e.clk.Advance(time.Minute)
	e.statusChanged(root, policy.RecordReprocessing)
	e.drain()
	if s := e.record(root)["Status__c"]; s != policy.RecordReprocessing {
		t.Fatalf("status = %v, want Reprocessing", s)
	}

	e.clk.Advance(time.Minute)
	again := failed503(policy.ActionDeadLetter, policy.DeadLetterExhausted)
	again.Response.Status, again.Attempt.Status = 502, 502
	chain := e.scheduled("orders", 1, replayOf(root), again)[0]
	e.drain()
	r := e.record(root)
	if r["Status__c"] != policy.RecordFailedAgain || r["Replay_Callout_Id__c"] != chain || r["Last_Status_Code__c"] != 502.0 {
		t.Errorf("after the chain dead-lettered: %v", r)
	}
	if _, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, chain); ok {
		t.Errorf("the replay chain got a record of its own")
	}

	e.clk.Advance(time.Minute)
	e.statusChanged(chain, policy.RecordReprocessing)
	ok := e.scheduled("orders", 1, replayOf(chain), succeeded())[0]
	e.drain()
	r = e.record(root)
	if r["Status__c"] != policy.RecordReprocessed || r["Replay_Callout_Id__c"] != ok {
		t.Errorf("after a chain succeeded: status %v, replay %v; want Reprocessed, %s", r["Status__c"], r["Replay_Callout_Id__c"], ok)
	}
	if got := len(e.emu.Records(FailedCalloutObject)); got != 1 {
		t.Errorf("%d records, want 1", got)
	}
	var states []any
	for _, ev := range e.emu.Events(CalloutResultEvent) {
		states = append(states, ev["State__c"])
	}
	if len(states) != 3 || states[2] != "succeeded" {
		t.Errorf("events = %v, want dead_lettered, dead_lettered, succeeded", states)
	}
	if err := e.writer.StatusChanged(ctxT(t), root, "Bogus", ""); err == nil {
		t.Error("an unknown status was accepted")
	}
}

// TestStatusChangeWaitsForTheRecord: a status change queued while the
// mirror is still failing ends with the status on the record, whatever
// order the writes land in.
func TestStatusChangeWaitsForTheRecord(t *testing.T) {
	e := newEnv(t)
	root := e.deadLetters("orders", 1)[0]
	e.emu.InjectRecord(sfemu.RecordFault{ExtID: root, Code: "UNABLE_TO_LOCK_ROW", Message: "unable to obtain exclusive access"})
	e.round(t)
	if info := e.entry(policy.EntryName(policy.EntryMirror, root)); info.Tries != 1 || info.Due.Sub(e.clk.Now()) < BaseBackoff/2 {
		t.Fatalf("locked record: entry %+v, want a retry with backoff", info)
	}
	e.statusChanged(root, policy.RecordReprocessing)
	e.drain() // the status write lands first
	e.clk.Advance(BaseBackoff)
	e.drain() // then the full mirror, with the current status
	if r := e.record(root); r["Status__c"] != policy.RecordReprocessing || r["Endpoint__c"] != "orders" {
		t.Errorf("record = %v", r)
	}
}

// TestExpiredAndDiscarded: when the proxy's copy expires the record
// becomes Expired; a record an admin sets to Discarded makes the proxy
// delete its copy, and its later expiry does not touch it.
func TestExpiredAndDiscarded(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 2)
	expiring, discarded := ids[0], ids[1]
	e.drain()

	e.clk.Advance(time.Hour)
	e.setStatus(discarded, policy.RecordDiscarded)
	n, err := e.writer.PollDiscarded(ctxT(t))
	if err != nil || n != 1 {
		t.Fatalf("poll = %d %v", n, err)
	}
	if _, err := e.store.Get(ctxT(t), discarded); err == nil {
		t.Fatal("the proxy's copy of a Discarded record was kept")
	}
	if _, err := e.store.Get(ctxT(t), expiring); err != nil {
		t.Fatalf("the other dead letter was touched: %v", err)
	}
	if n, _ := e.writer.PollDiscarded(ctxT(t)); n != 1 {
		t.Errorf("second poll handled %d (the overlap sees it again, harmlessly)", n)
	}

	e.mini.FastForward(30 * day) // the copies' TTL ends
	e.clk.Advance(30 * day)
	if n, err := e.writer.SweepExpired(ctxT(t)); err != nil || n != 1 {
		t.Fatalf("sweep = %d %v, want 1 record expired", n, err)
	}
	e.drain()
	if s := e.record(expiring)["Status__c"]; s != policy.RecordExpired {
		t.Errorf("status = %v, want Expired", s)
	}
	if s := e.record(discarded)["Status__c"]; s != policy.RecordDiscarded {
		t.Errorf("discarded record's status = %v", s)
	}
	if st, _ := e.outbox.RecordState(ctxT(t), expiring); st != (policy.RecordState{}) {
		t.Errorf("state kept after the last write: %+v", st)
	}
}

// TestCompletionEvents: only scheduled callouts publish Callout_Result__e
// (contract §8); a synchronous success or dead letter does not.
func TestCompletionEvents(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	sync := func(c policy.Completion) string {
		nc := newCallout("orders")
		nc.IdempotencyKey = ""
		res, err := e.store.Begin(ctx, nc, policy.BeginOptions{Lease: time.Minute})
		if err != nil || res.Claimed == nil {
			t.Fatalf("begin: %+v %v", res, err)
		}
		if _, err := e.store.Complete(ctx, res.Claimed, c); err != nil {
			t.Fatal(err)
		}
		return res.Claimed.ID
	}
	sync(succeeded())
	ambiguous := sync(failed503(policy.ActionDeadLetter, policy.DeadLetterAmbiguous))
	async := e.scheduled("orders", 1, func(*policy.NewCallout) {}, succeeded())[0]
	e.drain()
	evs := e.emu.Events(CalloutResultEvent)
	if len(evs) != 1 || evs[0]["Callout_Id__c"] != async || evs[0]["State__c"] != "succeeded" ||
		evs[0]["Body__c"] != `{"id":7}` || evs[0]["Status_Code__c"] != 201.0 || evs[0]["Body_Truncated__c"] != false {
		t.Errorf("events = %v, want one for %s", evs, async)
	}
	e.record(ambiguous) // mirrored, but no event
}

// TestRejectedRecordStays: a record Salesforce will never accept stays in
// the proxy's store and in the outbox, is reported and tried again hourly;
// the rest of its batch is written.
func TestRejectedRecordStays(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 3)
	e.emu.InjectRecord(sfemu.RecordFault{ExtID: ids[1], Code: "FIELD_CUSTOM_VALIDATION_EXCEPTION",
		Message: "Endpoint must be approved", Times: -1})
	e.drain()
	e.record(ids[0])
	e.record(ids[2])
	info := e.entry(policy.EntryName(policy.EntryMirror, ids[1]))
	if info.Due.Sub(e.clk.Now()) != RejectedRetry || !strings.Contains(info.LastError, "FIELD_CUSTOM_VALIDATION_EXCEPTION") {
		t.Errorf("rejected entry = %+v", info)
	}
	if _, err := e.store.Get(ctxT(t), ids[1]); err != nil {
		t.Errorf("the proxy's copy is gone: %v", err)
	}
	if !strings.Contains(e.logs.String(), "rejected a Failed_Callout__c record") {
		t.Error("the rejection was not reported")
	}
	e.emu.ClearFaults()
	e.clk.Advance(RejectedRetry)
	e.drain()
	e.record(ids[1])
}

// TestSlowdown: above api_usage_slowdown of the daily limit the writer
// makes one call per slowdown_interval. (Records and events now share one
// Composite call, so the second call is made for a second batch.)
func TestSlowdown(t *testing.T) {
	e := newEnv(t)
	e.emu.SetUsage(14000) // of 15000: 93 %
	e.deadLetters("orders", 3)
	e.drain()
	if got := e.emu.APICalls(); got != 1 {
		t.Fatalf("%d calls in the first interval, want 1", got)
	}
	if u := e.client.UsageRatio(); u < 0.9 {
		t.Errorf("usage ratio = %v", u)
	}
	e.deadLetters("orders", 3)
	e.drain()
	if got := e.emu.APICalls(); got != 1 {
		t.Fatalf("%d calls in the first interval, want 1", got)
	}
	e.clk.Advance(e.cfg.Salesforce.SlowdownInterval)
	e.drain()
	if got := e.emu.APICalls(); got != 2 {
		t.Fatalf("%d calls after one more interval, want 2", got)
	}
	if len(e.emu.Events(CalloutResultEvent)) != 6 || len(e.emu.Records(FailedCalloutObject)) != 6 {
		t.Errorf("not all written: %d events, %d records", len(e.emu.Events(CalloutResultEvent)),
			len(e.emu.Records(FailedCalloutObject)))
	}
}
