package salesforce

import (
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRecordGoneDropsItsWrites: a callout whose record is gone from the
// store (it expired, or an operator deleted it) before its queued
// Salesforce writes were sent settles those writes as dropped, each counted
// in callout_salesforce_writes_dropped_total (the CalloutSalesforceWritesDropped
// alert) and logged once with the callout's id, and the writes of the
// other callouts still go (docs/salesforce.md).
func TestRecordGoneDropsItsWrites(t *testing.T) {
	e := newEnv(t)
	ids := e.quietDeadLetters(2)
	key, ok := keyspace.Callout(ids[0])
	if !ok {
		t.Fatalf("no record key for %q", ids[0])
	}
	for _, k := range keyspace.RecordParts(key) {
		e.mini.Del(k)
	}
	e.drain()
	if n := testutil.ToFloat64(e.metrics.WritesDropped.WithLabelValues("m")); n != 1 {
		t.Errorf(`writes_dropped_total{kind="m"} = %v, want 1 (the mirror of the record that is gone)`, n)
	}
	var lines int
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, "the write is dropped") {
			lines++
			if !strings.Contains(l, ids[0]) {
				t.Errorf("a dropped-write line without the callout's id %s: %s", ids[0], l)
			}
		}
	}
	if lines == 0 {
		t.Error("no dropped-write log line")
	}
	if _, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, ids[0]); ok {
		t.Error("the callout whose record is gone was mirrored")
	}
	if _, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, ids[1]); !ok {
		t.Error("the other dead letter was not mirrored")
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("%d outbox entries left", n)
	}
}
