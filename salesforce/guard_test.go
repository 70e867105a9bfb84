package salesforce

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/outbox"
)

// TestAdminStatusSurvivesAnUpdate: an admin sets Reprocess Requested; before
// the next poll the proxy writes the record again (its mirror re-sent):
// the update leaves Status__c out, so the admin's value survives (before,
// every full upsert wrote Status__c and overwrote it with New).
func TestAdminStatusSurvivesAnUpdate(t *testing.T) {
	e := newEnv(t)
	root := e.settledDeadLetters(1)[0]
	e.setStatus(root, policy.RecordReprocessRequested)
	before := e.record(root)["SystemModstamp"]
	e.clk.Advance(time.Minute)
	if _, err := e.outbox.Put(ctxT(t), e.clk.Now(), outbox.Item{
		Name: policy.EntryName(policy.EntryMirror, root)}); err != nil {
		t.Fatal(err)
	}
	calls := e.emu.APICalls()
	e.drain()
	r := e.record(root)
	if r["SystemModstamp"] == before {
		t.Fatal("the record was not written again")
	}
	if r["Status__c"] != policy.RecordReprocessRequested {
		t.Errorf("Status__c = %v after the proxy's update, want the admin's Reprocess Requested", r["Status__c"])
	}
	if got := e.emu.APICalls() - calls; got != 1 {
		t.Errorf("%d calls for an update without a status, want 1 (no guard query)", got)
	}
}

// TestAdminChoiceSurvivesATransition: the proxy's own transitions are not
// written over an admin's choice made since the last poll either (one
// guard query per batch that writes statuses); a status that answers the
// admin's request — the reprocess poll's — is.
func TestAdminChoiceSurvivesATransition(t *testing.T) {
	e := newEnv(t)
	ids := e.settledDeadLetters(2)
	requested, discarded := ids[0], ids[1]
	e.setStatus(requested, policy.RecordReprocessRequested)
	e.setStatus(discarded, policy.RecordDiscarded)
	e.clk.Advance(time.Minute)
	// An ops replay of each starts, unaware of the admin (no poll yet).
	for _, id := range ids {
		e.statusChanged(id, policy.RecordReprocessing)
	}
	calls := e.emu.APICalls()
	e.drain()
	if got := e.emu.APICalls() - calls; got != 1 {
		t.Errorf("%d calls, want 1: the guard query; the status-only writes left nothing to write", got)
	}
	if s := e.record(requested)["Status__c"]; s != policy.RecordReprocessRequested {
		t.Errorf("Reprocessing written over an unseen Reprocess Requested: %v", s)
	}
	if s := e.record(discarded)["Status__c"]; s != policy.RecordDiscarded {
		t.Errorf("Reprocessing written over Discarded: %v", s)
	}
	// The reprocess poll sees the request and answers it: that status is
	// written over it.
	stamp, err := parseStamp(e.record(requested)["SystemModstamp"])
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	if err := e.writer.statusAt(ctxT(t), requested, policy.RecordReprocessing, "", e.clk.Now(), stamp); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if s := e.record(requested)["Status__c"]; s != policy.RecordReprocessing {
		t.Errorf("the poll's answer was not written: %v", s)
	}
	// Later transitions of the proxy go on as usual; Discarded stays.
	e.clk.Advance(time.Minute)
	for _, id := range ids {
		e.statusChanged(id, policy.RecordFailedAgain)
	}
	e.drain()
	if s := e.record(requested)["Status__c"]; s != policy.RecordFailedAgain {
		t.Errorf("status = %v, want Failed Again", s)
	}
	if s := e.record(discarded)["Status__c"]; s != policy.RecordDiscarded {
		t.Errorf("Failed Again written over Discarded: %v", s)
	}
}

// TestAnsweredSticksUntilWritten: the poll's answer and a later ending of
// the chain merge before they are written; the ending may still go over
// the request the answer answered.
func TestAnsweredSticksUntilWritten(t *testing.T) {
	e := newEnv(t)
	root := e.settledDeadLetters(1)[0]
	e.setStatus(root, policy.RecordReprocessRequested)
	stamp, _ := parseStamp(e.record(root)["SystemModstamp"])
	e.clk.Advance(time.Second)
	if err := e.writer.statusAt(ctxT(t), root, policy.RecordReprocessing, "", e.clk.Now(), stamp); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Second)
	e.statusChanged(root, policy.RecordReprocessed)
	e.drain()
	if s := e.record(root)["Status__c"]; s != policy.RecordReprocessed {
		t.Errorf("status = %v, want Reprocessed", s)
	}
}
