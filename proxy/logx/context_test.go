package logx

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestContextFields: a line logged with a context that carries a callout
// id and a trace context gets callout_id and trace_id once — not again
// when the line or the logger has them — and a line without one gets
// neither; the trace context read from a header round-trips through
// EncodeTrace and WithTraceContext as the store keeps it.
func TestContextFields(t *testing.T) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	var buf bytes.Buffer
	l, _ := New(&buf, Options{})
	ctx := FromHeader(context.Background(), http.Header{"Traceparent": {"00-" + tid + "-00f067aa0ba902b7-01"},
		"Tracestate": {"vendor=x"}})
	stored := EncodeTrace(ctx)
	if stored != "00-"+tid+"-00f067aa0ba902b7-01,vendor=x" {
		t.Fatalf("EncodeTrace = %q", stored)
	}
	ctx = WithCallout(WithTraceContext(context.Background(), stored), "c1")
	l.InfoContext(ctx, "a")
	l.InfoContext(ctx, "b", "callout_id", "c1", "trace_id", tid)
	l.With("callout_id", "c1").InfoContext(ctx, "c")
	l.Info("d")
	l.InfoContext(FromHeader(context.Background(), http.Header{"Traceparent": {"garbage"}}), "e")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []struct{ id, trace string }{{"c1", tid}, {"c1", tid}, {"c1", tid}, {"", ""}, {"", ""}}
	for i, line := range lines {
		if n := strings.Count(line, `"callout_id"`); n > 1 || strings.Count(line, `"trace_id"`) > 1 {
			t.Errorf("line %d repeats a field: %s", i, line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		id, _ := m["callout_id"].(string)
		tr, _ := m["trace_id"].(string)
		if id != want[i].id || tr != want[i].trace {
			t.Errorf("line %d = %s, want callout_id %q trace_id %q", i, line, want[i].id, want[i].trace)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	if got := EncodeTrace(context.Background()); got != "" {
		t.Errorf("EncodeTrace(no trace) = %q", got)
	}
}
