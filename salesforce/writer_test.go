package salesforce

import (
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestDeadLetterMirrored: a dead letter becomes a redacted Failed_Callout__c
// record upserted on Callout_Id__c, with its completion event, and the
// outbox empties.
func TestDeadLetterMirrored(t *testing.T) {
	e := newEnv(t)
	id := e.deadLetters("payments", 1)[0]
	e.drain()
	r := e.record(id)
	for _, c := range []struct {
		field string
		want  any
	}{
		{"Status__c", policy.RecordNew}, {"Endpoint__c", "payments"}, {"Method__c", "POST"},
		{"Path__c", "/v1/charges?api_key=[REDACTED]&x=1"}, {"Idempotency_Key__c", nil},
		{"Source_Record_Id__c", "a01000000000001AAA"}, {"Reason__c", "exhausted"},
		{"Attempts__c", 1.0}, {"Last_Status_Code__c", 503.0}, {"Last_Error__c", "status_5xx"},
		{"Request_Body__c", `{"amount":5,"card":{"number":"[REDACTED]"}}`},
		{"Last_Response_Body__c", `{"error":"unavailable","card":{"number":"[REDACTED]"}}`},
		{"Request_Body_Truncated__c", false}, {"Request_Body_Base64__c", false},
		{"First_Attempt_At__c", "2023-11-14T22:13:20.000Z"}, {"Dead_Lettered_At__c", "2023-11-14T22:13:20.000Z"},
		{"Expires_At__c", "2023-12-14T22:13:20.000Z"},
	} {
		if got := r[c.field]; got != c.want {
			t.Errorf("%s = %#v, want %#v", c.field, got, c.want)
		}
	}
	headers, _ := r["Request_Headers__c"].(string)
	if !strings.Contains(headers, "X-Card-Token: [REDACTED]") || strings.Contains(headers, "tok_123") {
		t.Errorf("request headers not redacted: %q", headers)
	}
	if log, _ := r["Attempt_Log__c"].(string); !strings.HasPrefix(log, "#1 first 2023-11-14T22:13:20Z 503 retryable 1000ms status_5xx") {
		t.Errorf("attempt log = %q", log)
	}
	evs := e.emu.Events(CalloutResultEvent)
	if len(evs) != 1 || evs[0]["Callout_Id__c"] != id || evs[0]["State__c"] != "dead_lettered" ||
		evs[0]["Status_Code__c"] != 503.0 || evs[0]["Source_Record_Id__c"] != "a01000000000001AAA" {
		t.Errorf("events = %v", evs)
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("outbox holds %d entries after the writes", n)
	}
}

// TestMirrorSurvivesALostFinished: the dead letter's writes are queued in
// the completing script, so a replica that died before telling anyone
// (no Finished call, no Wake) loses nothing: a fresh writer — another
// replica, or this one restarted — writes them.
func TestMirrorSurvivesALostFinished(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("payments", 3)
	e.writer = e.newWriter() // the replica that completed them is gone
	e.drain()
	for _, id := range ids {
		e.record(id)
	}
	if got := len(e.emu.Events(CalloutResultEvent)); got != 3 {
		t.Errorf("%d completion events, want 3", got)
	}
}

// TestInvalidSessionTwice: the upsert answers 401 INVALID_SESSION_ID, the
// token call succeeds, the upsert answers 401 again: exactly one re-mint
// and one retry, then the records wait in the outbox with backoff.
func TestInvalidSessionTwice(t *testing.T) {
	e := newEnv(t)
	e.deadLetters("orders", 1) // the first write mints the token
	e.drain()
	if got := e.emu.Calls("token"); got != 1 {
		t.Fatalf("token calls = %d, want 1", got)
	}
	ids := e.deadLetters("orders", 2) // same outage: no new notification
	e.emu.Inject(sfemu.Fault{Kind: "upsert", Status: 401, Body: sfemu.SessionExpired, Times: 2})
	upserts := e.emu.Calls("upsert")
	rep := e.round(t)
	if got := e.emu.Calls("token"); got != 2 {
		t.Errorf("token calls = %d, want 2 (one re-mint)", got)
	}
	if got := e.emu.Calls("upsert") - upserts; got != 2 {
		t.Errorf("upserts = %d, want 2 (one retry)", got)
	}
	if rep.Retried != 4 { // the records and their events share the one Composite call
		t.Errorf("round %+v: want both records (and their events) retried", rep)
	}
	for _, id := range ids {
		info := e.entry(policy.EntryName(policy.EntryMirror, id))
		if info.Tries != 1 || !info.Due.After(e.clk.Now()) || !strings.Contains(info.LastError, "INVALID_SESSION_ID") {
			t.Errorf("entry of %s = %+v: want one failed try, due later", id, info)
		}
	}
	again, _ := e.writer.Round(ctxT(t))
	if again.Claimed != 0 || e.emu.Calls("token") != 2 {
		t.Errorf("the records were tried again at once (%+v, %d token calls): no backoff", again, e.emu.Calls("token"))
	}
	e.clk.Advance(BaseBackoff)
	e.drain()
	for _, id := range ids {
		e.record(id)
	}
	if got := e.emu.Calls("token"); got != 2 {
		t.Errorf("token calls = %d after recovery, want 2", got)
	}
}

// TestLimitExceeded: 403 REQUEST_LIMIT_EXCEEDED makes no token call and
// pauses writes; every record is written once Salesforce recovers.
func TestLimitExceeded(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 5)
	e.emu.Inject(sfemu.Fault{Kind: "upsert", Status: 403, Body: sfemu.LimitExceeded})
	e.round(t)
	tokens, calls := e.emu.Calls("token"), e.emu.APICalls()
	if tokens != 1 || calls != 1 {
		t.Fatalf("token calls %d, API calls %d: want the first mint and the one refused upsert", tokens, calls)
	}
	until, why, err := e.outbox.PausedUntil(ctxT(t))
	if err != nil || !until.Equal(e.clk.Now().Add(e.cfg.Salesforce.LimitPause)) || why != pauseAPILimit {
		t.Fatalf("pause until %v %q (%v), want %v api_limit", until, why, err, e.clk.Now().Add(e.cfg.Salesforce.LimitPause))
	}
	// Another replica honours the pause too.
	other := e.newWriter()
	e.clk.Advance(e.cfg.Salesforce.LimitPause - time.Second)
	if rep, _ := other.Round(ctxT(t)); rep.Claimed != 0 {
		t.Fatalf("a round during the pause claimed %d entries", rep.Claimed)
	}
	if got := e.emu.Calls("upsert"); got != 1 {
		t.Fatalf("upserts during the pause: %d", got-1)
	}
	e.clk.Advance(time.Second)
	e.drain()
	for _, id := range ids {
		e.record(id)
		if _, ok, _ := e.outbox.Entry(ctxT(t), policy.EntryName(policy.EntryMirror, id)); ok {
			t.Errorf("entry of %s still queued", id)
		}
	}
	if got := e.emu.Calls("token"); got != 1 {
		t.Errorf("token calls = %d: the limit must never re-authenticate", got)
	}
}

// TestDroppedAfterCommit: the emulator commits a batch, then drops the
// connection before answering; the writer retries: still exactly one
// record per callout.
func TestDroppedAfterCommit(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 10)
	e.emu.Inject(sfemu.Fault{Kind: "upsert", Drop: true})
	rep, err := e.writer.Round(ctxT(t))
	if err != nil || rep.Retried != 20 { // the records and their events share the one Composite call
		t.Fatalf("round %+v %v: want the 10 records (and their 10 events) retried", rep, err)
	}
	if got := len(e.emu.Records(FailedCalloutObject)); got != 10 {
		t.Fatalf("the emulator committed %d records, want 10", got)
	}
	e.clk.Advance(BaseBackoff)
	e.drain()
	if got := e.emu.Calls("upsert"); got != 2 {
		t.Errorf("upserts = %d, want 2", got)
	}
	recs := e.emu.Records(FailedCalloutObject)
	if len(recs) != len(ids) {
		t.Fatalf("%d records for %d callouts", len(recs), len(ids))
	}
	seen := map[any]int{}
	for _, r := range recs {
		seen[r[ExternalIDField]]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("callout %s has %d records", id, seen[id])
		}
	}
}

// Test250DeadLetters: 250 dead letters at once take 2 collection upserts,
// not 250 (and 2 event publishes).
func Test250DeadLetters(t *testing.T) {
	e := newEnv(t)
	e.deadLetters("orders", 250)
	e.drain()
	if got := len(e.emu.Records(FailedCalloutObject)); got != 250 {
		t.Fatalf("%d records, want 250", got)
	}
	if got := e.emu.Calls("upsert"); got != 2 {
		t.Errorf("collection upserts = %d, want 2", got)
	}
	if got := e.emu.Calls("create"); got != 2 {
		t.Errorf("event publishes = %d, want 2", got)
	}
	if got := e.emu.Calls("upsert1") + e.emu.Calls("create1"); got != 0 {
		t.Errorf("%d single-record calls", got)
	}
}
