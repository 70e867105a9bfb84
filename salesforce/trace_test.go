package salesforce

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// tracedWriter is the env's writer with a TracerProvider whose spans sr
// records.
func (e *env) tracedWriter(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	tp, sr := tracingtest.Recorder(t, 1)
	w, err := NewWriter(WriterOptions{API: e.client, Store: e.store, Outbox: e.outbox, Salesforce: *e.cfg.Salesforce,
		Endpoints: endpointsOf(e.cfg), DeadLetterRetention: e.cfg.Policy.DeadLetterRetention,
		Metrics: e.metrics, Now: e.clk.Now, Rand: func() float64 { return 0.5 }, Owner: "replica-1",
		Logger: e.logger(), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	e.writer = w
	return sr
}

func batchAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]int64 {
	m := map[attribute.Key]int64{}
	for _, kv := range s.Attributes() {
		if kv.Value.Type() == attribute.INT64 {
			m[kv.Key] = kv.Value.AsInt64()
		}
	}
	return m
}

// TestWriteBatchSpan: each round that claims entries is one
// salesforce.write_batch span, a root, counting the records, events,
// notifications and API calls it made and how its entries settled; a
// round stopped by Salesforce (REQUEST_LIMIT_EXCEEDED) is an error span
// naming the code; a round with nothing to write makes no span.
func TestWriteBatchSpan(t *testing.T) {
	e := newEnv(t)
	sr := e.tracedWriter(t)
	e.deadLetters("payments", 3)
	rep := e.round(t)
	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	a := batchAttrs(s)
	events := int64(len(e.emu.Events(CalloutResultEvent)))
	if s.Name() != tracing.SpanWriteBatch || s.Parent().IsValid() || a["salesforce.records"] != 3 ||
		a["salesforce.events"] != events || events == 0 || a["salesforce.api_calls"] != int64(rep.Calls) ||
		a["salesforce.outbox_entries"] != int64(rep.Claimed) || a["salesforce.entries_done"] != int64(rep.Done) ||
		rep.Done != rep.Claimed || s.Status().Code.String() != "Unset" {
		t.Errorf("span %s parent %v status %v attributes %v; round %+v, %d events written", s.Name(), s.Parent(),
			s.Status(), a, rep, events)
	}
	e.round(t)
	if n := len(sr.Ended()); n != 1 {
		t.Errorf("an empty round made a span (%d spans)", n)
	}

	e.deadLetters("orders", 2)
	e.emu.Inject(sfemu.Fault{Kind: "upsert", Status: 403, Body: sfemu.LimitExceeded})
	e.round(t)
	failed := sr.Ended()[1]
	var code string
	for _, kv := range failed.Attributes() {
		if kv.Key == "salesforce.error_code" {
			code = kv.Value.AsString()
		}
	}
	if code != "REQUEST_LIMIT_EXCEEDED" || failed.Status().Code.String() != "Error" || batchAttrs(failed)["salesforce.entries_deferred"] == 0 {
		t.Errorf("stopped round: code %q status %v attributes %v", code, failed.Status(), batchAttrs(failed))
	}
}

// TestSinkLinesCarryTheCallersTrace (contract §12 "Log fields"; docs/operating.md
// "Logs"): a line of the Salesforce writer about one callout — its
// Failed_Callout__c record refused, its reprocess request replayed —
// carries the callout_id and the trace_id of the caller's traceparent kept
// with the callout, with the tracing exporter off and on (then the caller's
// trace, not the writer's batch span); a callout accepted without one logs
// no trace_id.
func TestSinkLinesCarryTheCallersTrace(t *testing.T) {
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	for _, traced := range []bool{false, true} {
		t.Run(fmt.Sprintf("exporter %v", traced), func(t *testing.T) {
			e := newEnv(t)
			if traced {
				e.tracedWriter(t)
			}
			stored := e.scheduled("orders", 2, func(nc *policy.NewCallout) {
				nc.TraceContext = "00-" + traceID + "-b7ad6b7169203331-01"
			}, failed503(policy.ActionDeadLetter, policy.DeadLetterExhausted))
			untraced := e.deadLetters("orders", 1)[0]
			for _, id := range []string{stored[0], untraced} {
				e.emu.InjectRecord(sfemu.RecordFault{ExtID: id, Code: "FIELD_CUSTOM_VALIDATION_EXCEPTION",
					Message: "refused by a validation rule"})
			}
			e.round(t)
			e.request(stored[1])
			_, p := e.replica("replica-2", e.replays("replays"))
			if rep := poll(t, p); rep.Replayed != 1 {
				t.Fatalf("poll replayed %d, want 1", rep.Replayed)
			}
			for _, c := range []struct{ msg, id, trace string }{
				{"Salesforce rejected a Failed_Callout__c record", stored[0], traceID},
				{"Salesforce rejected a Failed_Callout__c record", untraced, ""},
				{"reprocess requested in Salesforce: replaying", stored[1], traceID},
			} {
				line := logLine(t, e.logs.String(), c.msg, c.id)
				if got, _ := line["trace_id"].(string); got != c.trace {
					t.Errorf("%q of %s: trace_id %q, want %q\n%v", c.msg, c.id, got, c.trace, line)
				}
			}
		})
	}
}

// logLine returns the JSON log line of logs whose msg starts with msg and
// whose callout_id is id; the test fails without one.
func logLine(t *testing.T, logs, msg, id string) map[string]any {
	t.Helper()
	for l := range strings.Lines(logs) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		if got, _ := m["msg"].(string); strings.HasPrefix(got, msg) && m["callout_id"] == id {
			return m
		}
	}
	t.Fatalf("no log line %q with callout_id %s:\n%s", msg, id, logs)
	return nil
}
