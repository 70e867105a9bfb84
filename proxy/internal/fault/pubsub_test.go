//go:build fault

package fault

import (
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/salesforce"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestSalesforcePubSubReprocess: the real binary with salesforce.pubsub at
// the emulator's Pub/Sub API over TLS (trusted through SSL_CERT_FILE, as
// the HTTPS side is) and both polls an hour apart. A callout dead-letters,
// its Failed_Callout__c record is written, an admin sets Status__c to
// Reprocess Requested, and the change event on the subscription replays it
// and the record ends Reprocessed (docs/salesforce.md "Reprocess without
// polling"). It came from the subscription: after the admin's change
// every Failed_Callout__c query by status named the record by Id
// (HandleChanges, fed by the change event), none was a poll, and the one
// stream never failed (no fallback poll). Every Pub/Sub call authenticated
// with the REST client's token (one login in all) and the org's instance
// URL and tenant id.
func TestSalesforcePubSubReprocess(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	emu, env := startEmulator(t, sfemu.Options{Objects: sfObjects(),
		Defaults: map[string]sfemu.Record{salesforce.FailedCalloutObject: {"Status__c": policy.RecordNew}}})
	ps := emu.StartPubSub(t, sfemu.PubSubOptions{Entities: []string{salesforce.FailedCalloutObject}, TLS: true})
	var ok atomic.Bool
	var replays atomic.Int32 // upstream requests once it succeeds
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		if !ok.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		replays.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	cfg := config(rs.URL, slices.Concat(timeouts, []string{"max_attempts: 1"}), endpoint("pay", up.URL)) +
		sfBlock(emu, env, "pubsub: "+ps.Addr(), "poll_interval: 1h", "reprocess_interval: 1h")
	p := proctest.StartProxy(t, proxyBinary, cfg, proctest.ProxyOptions{Name: "subscriber", Env: env})

	// The stream is open and its catch-up poll (a subscription at LATEST)
	// has run: no later poll is due within the hour.
	end := time.Now().Add(60 * time.Second)
	for ; ps.Streams() == 0 || polls(emu.Queries()) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) || p.Count("Pub/Sub subscription failed") > 0 {
			t.Fatalf("no stream with its catch-up poll (%d streams, queries %q); log:\n%s", ps.Streams(),
				emu.Queries(), p.Tail(20))
		}
	}
	acc := deadLetters(t, newClient(t), p.URL, "ps", 1)
	waitMirrored(t, emu, acc, 60*time.Second)
	rec, _ := emu.Record(salesforce.FailedCalloutObject, salesforce.ExternalIDField, acc[0].ID)
	recID, _ := rec["Id"].(string)

	ok.Store(true)
	before := len(emu.Queries())
	emu.Set(t, salesforce.FailedCalloutObject, salesforce.ExternalIDField, acc[0].ID, "Status__c",
		policy.RecordReprocessRequested)
	requested := time.Now()
	for end = requested.Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, _ := emu.Record(salesforce.FailedCalloutObject, salesforce.ExternalIDField, acc[0].ID)
		if r["Status__c"] == policy.RecordReprocessed {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("record %s is %v 60 s after Reprocess Requested, want %s; log:\n%s", recID, r["Status__c"],
				policy.RecordReprocessed, p.Tail(20))
		}
	}
	took := time.Since(requested)

	after := emu.Queries()[before:]
	byID := 0
	for _, q := range after {
		if strings.Contains(q, "FROM "+salesforce.FailedCalloutObject) && strings.Contains(q, "Id IN ('"+recID+"')") {
			byID++
		}
	}
	if n := polls(after); n > 0 || byID == 0 {
		t.Errorf("after Reprocess Requested: %d polls, %d queries by the record's Id (want 0 and some: the "+
			"change event, not a poll, replayed it): %q", n, byID, after)
	}
	if n, open := ps.Calls("Subscribe"), ps.Streams(); n != 1 || open != 1 {
		t.Errorf("%d Subscribe calls, %d streams open; want the one stream open throughout (no fallback poll)", n, open)
	}
	if n := p.Count("Pub/Sub subscription failed"); n > 0 {
		t.Errorf("the log shows %d failed streams", n)
	}
	if n := replays.Load(); n != 1 {
		t.Errorf("the dead letter was replayed to the upstream %d times, want 1", n)
	}
	auths := ps.Authenticated()
	if len(auths) == 0 {
		t.Fatal("no Pub/Sub call authenticated")
	}
	for _, a := range auths {
		if a != auths[0] || a.InstanceURL != emu.URL || a.TenantID != sfemu.OrgID {
			t.Errorf("a Pub/Sub call authenticated with %+v, want the one token, instance URL %s, tenant %s (first: %+v)",
				a, emu.URL, sfemu.OrgID, auths[0])
		}
	}
	if n := emu.Calls("token"); n != 1 {
		t.Errorf("%d token requests, want 1: the subscription reuses the REST client's token", n)
	}
	t.Logf("Reprocess Requested to Reprocessed in %s through the subscription (TLS, %d authenticated Pub/Sub "+
		"calls, %d change events published; after the change %d queries, %d by the record's Id, %d polls)",
		took.Round(time.Millisecond), len(auths), ps.Published(sfemu.TopicOf(salesforce.FailedCalloutObject)),
		len(after), byID, polls(after))
}

// polls counts the polls among queries: the reprocess and discard
// queries of Failed_Callout__c by status and watermark, not naming their
// records by Id as Reprocessor.HandleChanges does (the writer's guard
// query, by Callout_Id__c, is neither).
func polls(queries []string) int {
	n := 0
	for _, q := range queries {
		if strings.Contains(q, "FROM "+salesforce.FailedCalloutObject+" WHERE Status__c = ") &&
			!strings.Contains(q, "Id IN (") {
			n++
		}
	}
	return n
}

// sfObjects declares the objects and fields the proxy writes (any length),
// as the org of apex-stubs/ has them: the change events' schema is
// Failed_Callout__c's fields.
func sfObjects() map[string]map[string]int {
	names := func(fs []salesforce.Field) map[string]int {
		m := map[string]int{}
		for _, f := range fs {
			m[f.Name] = 0
		}
		return m
	}
	return map[string]map[string]int{salesforce.FailedCalloutObject: names(salesforce.FailedCalloutFields),
		salesforce.CalloutResultEvent: names(salesforce.CalloutResultFields),
		"CustomNotificationType":      {"Id": 0, "DeveloperName": 0}}
}
