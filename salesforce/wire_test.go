package salesforce

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestInvalidFieldRefusesTheCollection: a field the integration user
// cannot see (not deployed, or no field-level security) makes a real org
// refuse the whole collection with 400 INVALID_FIELD, not record by
// record. The proxy reports it once per try — one error naming the field
// and the permission set, callout_salesforce_write_errors_total{code} —
// keeps every write in the outbox, holds later record writes back to the
// same time (the events still go), backs off towards RejectedCeiling, and
// writes everything once the field is back.
func TestInvalidFieldRefusesTheCollection(t *testing.T) {
	e := newEnv(t)
	e.emu.HideField(FailedCalloutObject, "Attempt_Log__c")
	ids := e.deadLetters("orders", 3)
	rep, err := e.writer.Round(ctxT(t))
	if err != nil || rep.Calls != 1 {
		t.Fatalf("round %+v %v: want one call", rep, err)
	}
	if got := len(e.emu.Records(FailedCalloutObject)); got != 0 {
		t.Fatalf("%d records written: the collection must be refused as a whole", got)
	}
	if got := len(e.emu.Events(CalloutResultEvent)); got != 3 {
		t.Errorf("%d events published, want 3 (their collection is not refused)", got)
	}
	if got := testutil.ToFloat64(e.metrics.WriteErrors.WithLabelValues("INVALID_FIELD")); got != 1 {
		t.Errorf("write_errors_total{INVALID_FIELD} = %v, want 1", got)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "Attempt_Log__c") || !strings.Contains(logs, IntegrationPermissionSet) ||
		strings.Count(logs, "Salesforce refuses every Failed_Callout__c write") != 1 {
		t.Errorf("want one error naming the field and the permission set:\n%s", logs)
	}
	due := map[time.Time]bool{}
	for _, id := range ids {
		info := e.entry(policy.EntryName(policy.EntryMirror, id))
		due[info.Due] = true
		if !info.Due.Equal(e.clk.Now().Add(RejectedRetry)) || !strings.Contains(info.LastError, "INVALID_FIELD") {
			t.Errorf("entry of %s = %+v, want due in %v", id, info, RejectedRetry)
		}
	}
	if len(due) != 1 {
		t.Errorf("the refused batch is due at %d different times, want one", len(due))
	}
	// A new dead letter meanwhile: its record waits with the others, its
	// event goes.
	later := e.deadLetters("orders", 1)[0]
	e.clk.Advance(BaseBackoff)
	e.drain()
	if _, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, later); ok {
		t.Error("a record write went out while Failed_Callout__c writes were deferred")
	}
	if got := len(e.emu.Events(CalloutResultEvent)); got != 4 {
		t.Errorf("%d events, want 4", got)
	}
	// Still broken at the next try: the backoff doubles.
	e.clk.Advance(RejectedRetry)
	e.drain()
	defs, err := e.outbox.Deferrals(ctxT(t))
	if err != nil || defs[FailedCalloutObject].Fails != 2 ||
		!defs[FailedCalloutObject].Until.Equal(e.clk.Now().Add(2*RejectedRetry)) {
		t.Fatalf("deferral after the second refusal = %+v %v, want 2 fails, %v", defs[FailedCalloutObject], err,
			2*RejectedRetry)
	}
	// Fixed (the permission set assigned): everything arrives.
	e.emu.ShowField(FailedCalloutObject, "Attempt_Log__c", LongTextMax)
	e.clk.Advance(2 * RejectedRetry)
	e.drain()
	for _, id := range append(ids, later) {
		e.record(id)
	}
	if defs, _ := e.outbox.Deferrals(ctxT(t)); defs[FailedCalloutObject].Fails != 0 {
		t.Errorf("deferral not ended after a success: %+v", defs)
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("%d entries left", n)
	}
}

// TestInvalidTypeRefusesTheCollection: an object the user cannot see
// (Callout_Result__e not deployed) is refused as a whole too
// (INVALID_TYPE), and the records still go.
func TestInvalidTypeRefusesTheCollection(t *testing.T) {
	e := newEnvWith(t, func(o *sfemu.Options) { delete(o.Objects, CalloutResultEvent) })
	ids := e.deadLetters("orders", 2)
	e.drain()
	for _, id := range ids {
		e.record(id)
	}
	if got := testutil.ToFloat64(e.metrics.WriteErrors.WithLabelValues("INVALID_TYPE")); got != 1 {
		t.Errorf("write_errors_total{INVALID_TYPE} = %v, want 1", got)
	}
	if !strings.Contains(e.logs.String(), "Salesforce refuses every Callout_Result__e write (INVALID_TYPE") {
		t.Errorf("no clear error:\n%s", e.logs.String())
	}
	if n := e.outboxLen(); n != 2 {
		t.Errorf("%d entries kept, want the 2 events", n)
	}
}

// TestConcurrentLimitPausesBriefly: REQUEST_LIMIT_EXCEEDED with
// ConcurrentPerOrgLongTxn (too many long requests at once) holds writes
// back for seconds, doubling, and does not pause them for limit_pause as
// the daily limit does.
func TestConcurrentLimitPausesBriefly(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 2)
	e.emu.Inject(sfemu.Fault{Kind: "composite", Status: 403, Body: sfemu.ConcurrentLimitExceeded, Times: 2})
	for _, want := range []time.Duration{ConcurrentBackoff, 2 * ConcurrentBackoff} {
		e.round(t)
		if until, _, _ := e.outbox.PausedUntil(ctxT(t)); !until.IsZero() {
			t.Fatalf("a concurrency limit paused writes until %v (the daily limit's pause)", until)
		}
		defs, _ := e.outbox.Deferrals(ctxT(t))
		if got := defs[""].Until.Sub(e.clk.Now()); got != want {
			t.Fatalf("held back for %v, want %v", got, want)
		}
		e.clk.Advance(want)
	}
	e.drain()
	for _, id := range ids {
		e.record(id)
	}
	if e.emu.Calls("token") != 1 {
		t.Errorf("%d token calls: a limit never re-authenticates", e.emu.Calls("token"))
	}
	if got := testutil.ToFloat64(e.metrics.Requests.WithLabelValues(string(sfapi.ConcurrentLimit))); got != 2 {
		t.Errorf("requests{concurrent_limit} = %v, want 2", got)
	}
}

// TestEventEnqueuedIsSuccess: a publish answers success true with an
// OPERATION_ENQUEUED entry in errors (the event's UUID): a success, not a
// failed record.
func TestEventEnqueuedIsSuccess(t *testing.T) {
	e := newEnv(t)
	res, err := e.client.Composite(ctxT(t), []sfapi.Subrequest{sfapi.CreateSubrequest("ev", CalloutResultEvent,
		[]sfapi.Record{{"Callout_Id__c": "c1", "Endpoint__c": "orders", "State__c": "succeeded", "Body_Truncated__c": false}})})
	if err != nil {
		t.Fatal(err)
	}
	var raw []struct {
		Success bool `json:"success"`
		Errors  []struct {
			StatusCode string `json:"statusCode"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(res[0].Body, &raw); err != nil || len(raw) != 1 || !raw[0].Success ||
		len(raw[0].Errors) != 1 || raw[0].Errors[0].StatusCode != "OPERATION_ENQUEUED" {
		t.Fatalf("emulator's publish result = %s (%v), want success with OPERATION_ENQUEUED", res[0].Body, err)
	}
	errs, cerr := sfapi.CollectionResults("create", res[0], 1)
	if cerr != nil || errs[0] != nil {
		t.Errorf("OPERATION_ENQUEUED read as a failure: %v %v", cerr, errs)
	}
	e.scheduled("orders", 1, func(nc *policy.NewCallout) {}, succeeded())
	e.drain()
	if n := e.outboxLen(); n != 0 || len(e.emu.Events(CalloutResultEvent)) != 2 {
		t.Errorf("event entry kept (%d left) or not published", n)
	}
}

// TestBatchesBoundedByBytes: records with full Long Text Areas are sent in
// as many Composite requests as salesforce.batch_max_bytes needs, every
// request within it, and none re-sent.
func TestBatchesBoundedByBytes(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.Salesforce.BatchMaxBytes = 1 << 20 })
	big := strings.Repeat("x", LongTextMax)
	ids := e.scheduled("orders", 12, func(nc *policy.NewCallout) {
		nc.Body, nc.Header = []byte(big), http.Header{"Content-Type": {"text/plain"}}
	}, failed503(policy.ActionDeadLetter, policy.DeadLetterExhausted))
	e.drain()
	for _, id := range ids {
		e.record(id)
	}
	if got := e.emu.LargestRequest(); got > 1<<20 {
		t.Errorf("largest request %d bytes, over batch_max_bytes %d", got, 1<<20)
	}
	// 12 records of ~131 KB in 1 MiB requests: at least 2, far fewer than 12.
	if calls := e.emu.APICalls(); calls < 2 || calls > 4 {
		t.Errorf("%d calls for 12 large records in 1 MiB batches", calls)
	}
	if got := e.emu.Calls("upsert"); got != int(e.emu.APICalls()) {
		t.Errorf("%d upsert collections in %d calls: a record was re-sent", got, e.emu.APICalls())
	}
	t.Logf("12 records of %d characters: %d calls, largest request %d bytes", LongTextMax, e.emu.APICalls(),
		e.emu.LargestRequest())
}
