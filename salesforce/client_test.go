package salesforce

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

func TestSingleUpsert(t *testing.T) {
	e := newEnv(t)
	for _, want := range []bool{true, false} {
		created, err := e.client.Upsert(ctxT(t), FailedCalloutObject, ExternalIDField, "a/b c", sfapi.Record{"Status__c": policy.RecordNew})
		if err != nil || created != want {
			t.Fatalf("upsert: created %v %v, want %v", created, err, want)
		}
	}
	if r := e.record("a/b c"); r["Status__c"] != policy.RecordNew {
		t.Errorf("record = %v", r)
	}
	_, err := e.client.Upsert(ctxT(t), FailedCalloutObject, ExternalIDField, "x", sfapi.Record{"Nope__c": 1})
	if sfapi.ClassOf(err) != sfapi.Rejected || !strings.Contains(err.Error(), "INVALID_FIELD") {
		t.Errorf("bad field: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.deadLetters("orders", 2)
	e.emu.Inject(sfemu.Fault{Kind: "upsert", Status: 500, Body: sfemu.ServerError})
	e.drain()
	e.clk.Advance(time.Minute)
	e.drain()
	for _, c := range []struct {
		result string
		want   float64
	}{{"ok", 1}, {"retryable", 1}} { // the 500 fails the round's one Composite call; the next one succeeds
		if got := testutil.ToFloat64(e.metrics.Requests.WithLabelValues(c.result)); got != c.want {
			t.Errorf("requests{result=%s} = %v, want %v", c.result, got, c.want)
		}
	}
	if got := testutil.ToFloat64(e.metrics.APIUsage); got <= 0 || got >= 1 {
		t.Errorf("api usage ratio = %v", got)
	}
	if got := testutil.ToFloat64(e.metrics.OutboxItems); got != 0 {
		t.Errorf("outbox items = %v", got)
	}
}
