package salesforce

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// hook is a webhook receiver that records what it got and answers status.
type hook struct {
	mu      sync.Mutex
	notices []Notice
	status  int
}

func newHook(t *testing.T) (*hook, *httptest.Server) {
	h := &hook{status: http.StatusNoContent}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n Notice
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &n) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.status < 300 {
			h.notices = append(h.notices, n)
		}
		w.WriteHeader(h.status)
	}))
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hook) got() []Notice {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Notice(nil), h.notices...)
}

func (h *hook) answer(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = status
}

// TestOutageOneNotification: an outage producing 40 dead letters for one
// endpoint notifies its owner once, in Salesforce and on the webhook; the
// Salesforce notification opens the first dead letter's record (targetId,
// the Id its upsert answered in the same round).
func TestOutageOneNotification(t *testing.T) {
	h, srv := newHook(t)
	e := newEnv(t, withWebhook(srv.URL))
	ids := e.deadLetters("payments", 40)
	e.drain()
	notes := e.emu.Notifications()
	if len(notes) != 1 {
		t.Fatalf("%d custom notifications, want 1: %v", len(notes), notes)
	}
	n := notes[0]
	if n["recipientIds"] != owner || n["customNotifTypeId"] != "0MLEMU000000001AAA" ||
		!strings.Contains(n["title"].(string), "payments") || !strings.Contains(n["body"].(string), ids[0]) ||
		n["targetId"] != e.record(ids[0])["Id"] || n["targetPageRef"] != "" {
		t.Errorf("notification = %v", n)
	}
	hooks := h.got()
	if len(hooks) != 1 || hooks[0].Event != "outage" || hooks[0].CalloutID != ids[0] || hooks[0].Owner != owner ||
		hooks[0].Reason != "exhausted" {
		t.Errorf("webhook got %+v, want one outage notice for %s", hooks, ids[0])
	}
	if got := e.emu.Calls("action"); got != 1 {
		t.Errorf("action calls = %d", got)
	}
}

// TestNotificationTargetsRetriedSeparately: when the webhook fails and
// Salesforce takes the notification, only the webhook is tried again, so
// the owner is not told twice.
func TestNotificationTargetsRetriedSeparately(t *testing.T) {
	h, srv := newHook(t)
	e := newEnv(t, withWebhook(srv.URL))
	h.answer(http.StatusServiceUnavailable)
	ids := e.deadLetters("payments", 1)
	e.round(t)
	name := policy.EntryName(policy.EntryOutage, "payments", ids[0])
	if info := e.entry(name); info.Payload != `["webhook"]` || info.Tries != 1 {
		t.Fatalf("entry = %+v: want the webhook still to reach", info)
	}
	h.answer(http.StatusOK)
	e.clk.Advance(time.Minute)
	e.drain()
	if got := len(e.emu.Notifications()); got != 1 {
		t.Errorf("%d Salesforce notifications, want 1", got)
	}
	if got := len(h.got()); got != 1 {
		t.Errorf("%d webhook notices, want 1", got)
	}
}

// TestDisableNotification: disabling an endpoint tells its owner once,
// with the reason, and its pending callouts are mirrored with their
// completion events.
func TestDisableNotification(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.store.Enqueue(ctx, newCallout("payments"), policy.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := e.store.Disable(ctx, "payments", "auto: no success since 2023-11-11T22:13:20Z")
	if err != nil || len(res.DeadLettered) != 1 {
		t.Fatalf("disable: %+v %v", res, err)
	}
	e.drain()
	notes := e.emu.Notifications()
	if len(notes) != 1 || !strings.Contains(notes[0]["body"].(string), "auto: no success since") ||
		!strings.Contains(notes[0]["title"].(string), "disabled") {
		t.Fatalf("notifications = %v", notes)
	}
	if r := e.record(res.DeadLettered[0]); r["Reason__c"] != "endpoint_disabled" {
		t.Errorf("reason = %v", r["Reason__c"])
	}
	if got := len(e.emu.Events(CalloutResultEvent)); got != 1 {
		t.Errorf("%d events, want 1", got)
	}
}

// TestNotificationWithoutOwnerOrWebhook: nothing to send, nothing kept.
func TestNotificationWithoutOwnerOrWebhook(t *testing.T) {
	e := newEnv(t)
	e.deadLetters("orders", 2) // orders has no owner
	e.drain()
	if got := e.emu.Calls("action"); got != 0 {
		t.Errorf("action calls = %d", got)
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("outbox holds %d entries", n)
	}
}

// TestNotificationTypeMissing: without the custom notification type in
// the org, the notification stays in the outbox (tried hourly) while the
// records are written.
func TestNotificationTypeMissing(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(sfemu.Fault{Kind: "query", Status: 200, Body: `{"totalSize":0,"done":true,"records":[]}`})
	ids := e.deadLetters("payments", 1)
	e.drain()
	e.record(ids[0])
	info := e.entry(policy.EntryName(policy.EntryOutage, "payments", ids[0]))
	if !strings.Contains(info.LastError, NotificationType) || info.Due.Sub(e.clk.Now()) != RejectedRetry {
		t.Errorf("entry = %+v: want it kept for an hour, naming the missing type", info)
	}
	e.clk.Advance(RejectedRetry)
	e.drain()
	if got := len(e.emu.Notifications()); got != 1 {
		t.Errorf("%d notifications after the type appeared", got)
	}
}

// TestNotificationPartialFailure: the notification action answers 400
// when one input fails, with per-input results (isSuccess true and false)
// and the successful inputs kept. Only the failed one is sent again: its
// owner is told once it works, the other owner exactly once (before: the
// whole call was taken as failed and every notification in it re-sent).
func TestNotificationPartialFailure(t *testing.T) {
	e := newEnv(t)
	e.emu.InjectRecord(sfemu.RecordFault{ExtID: owner2, Code: "INVALID_ARGUMENT",
		Message: "recipient is not an active user", Times: 1})
	e.deadLetters("payments", 1)
	e.deadLetters("ledger", 1)
	e.round(t)
	byOwner := func() map[any]int {
		m := map[any]int{}
		for _, n := range e.emu.Notifications() {
			m[n["recipientIds"]]++
		}
		return m
	}
	if got := byOwner(); got[owner] != 1 || got[owner2] != 0 || e.emu.Calls("action") != 1 {
		t.Fatalf("after the 400: notifications %v, %d action calls; want the first owner's only", got,
			e.emu.Calls("action"))
	}
	for range 3 {
		e.clk.Advance(RejectedCeiling)
		e.drain()
	}
	if got := byOwner(); got[owner] != 1 || got[owner2] != 1 {
		t.Errorf("notifications by owner = %v, want one each", got)
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("%d outbox entries left", n)
	}
}
