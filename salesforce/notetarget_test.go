package salesforce

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestNotificationOpensRecordWrittenEarlier: when the notification goes out
// in a later round than its dead letter's record (the first action call
// failed), the record Id is read with one query on Callout_Id__c and the
// notification still opens the record; a disabled endpoint's notification,
// which has no one record, opens the Needs Attention list view.
func TestNotificationOpensRecordWrittenEarlier(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(sfemu.Fault{Kind: "action", Status: http.StatusServiceUnavailable, Body: sfemu.ServerError})
	ids := e.deadLetters("payments", 1)
	e.round(t)
	if n := len(e.emu.Notifications()); n != 0 {
		t.Fatalf("%d notifications after the failed action call, want 0", n)
	}
	queries := e.emu.Calls("query")
	e.clk.Advance(time.Hour)
	e.drain()
	notes := e.emu.Notifications()
	if len(notes) != 1 || notes[0]["targetId"] != e.record(ids[0])["Id"] || notes[0]["targetPageRef"] != "" {
		t.Fatalf("notifications = %v, want one opening the record of %s", notes, ids[0])
	}
	if n := e.emu.Calls("query") - queries; n != 1 {
		t.Errorf("%d queries for the record Id, want 1", n)
	}

	ctx := ctxT(t)
	if _, err := e.store.Disable(ctx, "payments", "admin"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	notes = e.emu.Notifications()
	if len(notes) != 2 || notes[1]["targetId"] != "" ||
		!strings.Contains(notes[1]["targetPageRef"].(string), `"filterName":"Needs_Attention"`) {
		t.Fatalf("disable notification = %v, want the Needs Attention list view", notes[len(notes)-1])
	}
}
