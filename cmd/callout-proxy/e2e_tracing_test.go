package main

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback (the OTLP
// specification's "OTLP/HTTP": POST /v1/traces, binary protobuf
// ExportTraceServiceRequest in, ExportTraceServiceResponse out), standing in
// for an OpenTelemetry Collector. It keeps every span it receives.
type otlpReceiver struct {
	URL string

	mu    sync.Mutex
	spans []otlpSpan
}

// otlpSpan is one received span, ids in hex.
type otlpSpan struct {
	TraceID, SpanID, ParentID, Name string
	Kind                            string
	Start, End                      uint64
	Attrs                           map[string]string
	Resource                        map[string]string
	StatusCode                      string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" ||
			r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "not OTLP/HTTP protobuf", http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			res := attrMap(rs.GetResource().GetAttributes())
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					rc.spans = append(rc.spans, otlpSpan{
						TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
						ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind().String(),
						Start: s.GetStartTimeUnixNano(), End: s.GetEndTimeUnixNano(), Attrs: attrMap(s.GetAttributes()),
						Resource: res, StatusCode: s.GetStatus().GetCode().String(),
					})
				}
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

// attrMap renders OTLP attributes as strings (ints in decimal).
func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetDoubleValue())
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// trace returns the received spans of traceID named name, by start time.
func (rc *otlpReceiver) trace(traceID, name string) []otlpSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []otlpSpan
	for _, s := range rc.spans {
		if s.TraceID == traceID && (name == "" || s.Name == name) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b otlpSpan) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// The Apex client's traceparent of the e2e callout: its trace id, a span id
// of its own, flags 00 (Apex records nothing).
const (
	e2eTrace  = "0af7651916cd43dd8448eb211c80319c"
	e2eParent = "00-" + e2eTrace + "-b7ad6b7169203331-00"
)

// TestE2ETracing is the end-to-end case on the real program with
// tracing on, exporting over OTLP/HTTP to an in-process receiver:
//   - a keyed POST carrying Apex's traceparent fails twice (the synchronous
//     attempt, then the dispatcher's first retry) and then succeeds
//     (the dispatcher's second): the receiver holds one trace — the
//     caller's trace id — with the admission span and three attempt spans
//     in order, each the admission's child; the upstream saw that trace id
//     on all three attempts, each time one traceparent: the attempt's;
//   - a keyed POST without a traceparent (the proxy starts the trace) that
//     becomes a dead letter, then is replayed through the admin API: the
//     replay span and the replay's attempt are in the original trace;
//   - the ingress's attempt lines and the dead-letter line carry trace_id;
//   - every span names the service and the replica.
func TestE2ETracing(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	var mu sync.Mutex
	answers := map[string][]int{"/v1/charges": {503, 503, 201}, "/v1/refunds": {503, 400, 200}}
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		status := http.StatusOK
		if q := answers[r.URL.Path]; len(q) > 0 {
			status, answers[r.URL.Path] = q[0], q[1:]
		}
		mu.Unlock()
		w.WriteHeader(status)
	})
	cfg := withPolicy(devConfig(proctest.Endpoint("trace-api", up.URL, loopbackNets)), "base_delay: 10ms", "max_delay: 20ms") +
		"tracing:\n  endpoint: " + rc.URL + "\n  sample_ratio: 1\n  replica: e2e-replica-1\n"
	p := startProxy(t, cfg, testEnv())

	h := keyed("trace-charge-1", false)
	h.Set("Traceparent", e2eParent)
	resp, body := p.call(t, http.MethodPost, "/callout/trace-api/v1/charges", strings.NewReader(`{"amount":1}`), h)
	charge := statusDoc(t, body).ID
	if resp.StatusCode != http.StatusAccepted || charge == "" {
		t.Fatalf("charge = %d %s, want 202", resp.StatusCode, body)
	}
	waitState(t, p, charge, "succeeded")

	resp, body = p.call(t, http.MethodPost, "/callout/trace-api/v1/refunds", strings.NewReader(`{"amount":1}`),
		keyed("trace-refund-1", false))
	refund := statusDoc(t, body).ID
	if resp.StatusCode != http.StatusAccepted || refund == "" {
		t.Fatalf("refund = %d %s, want 202", resp.StatusCode, body)
	}
	waitState(t, p, refund, "dead_lettered")
	replayID := replaySucceeds(t, p, refund)
	if err := p.stop(); err != nil { // flushes the spans still queued
		t.Fatal(err)
	}

	// The charge: one trace, the caller's.
	adm := rc.trace(e2eTrace, "callout.admission")
	atts := rc.trace(e2eTrace, "callout.attempt")
	if len(adm) != 1 || len(atts) != 3 || len(rc.trace(e2eTrace, "")) != 4 {
		t.Fatalf("the caller's trace holds %d admission and %d attempt spans (%d in all), want 1, 3 and 4",
			len(adm), len(atts), len(rc.trace(e2eTrace, "")))
	}
	if adm[0].ParentID != "b7ad6b7169203331" || adm[0].Attrs["callout.id"] != charge || adm[0].Kind != "SPAN_KIND_SERVER" {
		t.Errorf("admission span %+v: want the caller's span as parent and the callout's id", adm[0])
	}
	for i, s := range atts {
		wantKind, wantMode := "retry", "dispatched"
		if i == 0 {
			wantKind, wantMode = "first", "synchronous"
		}
		if s.ParentID != adm[0].SpanID || s.Attrs["callout.attempt"] != fmt.Sprint(i+1) ||
			s.Attrs["callout.attempt.kind"] != wantKind || s.Attrs["callout.attempt.mode"] != wantMode ||
			s.Attrs["http.response.status_code"] != fmt.Sprint([]int{503, 503, 201}[i]) {
			t.Errorf("attempt span %d: parent %s attributes %v", i+1, s.ParentID, s.Attrs)
		}
		if s.Resource["service.name"] != "callout-proxy" || s.Resource["service.instance.id"] != "e2e-replica-1" {
			t.Errorf("resource %v", s.Resource)
		}
	}
	var parents, refundParents []string
	for _, r := range up.Requests("") {
		switch r.RequestURI {
		case "/v1/charges":
			parents = append(parents, strings.Join(r.Header.Values("Traceparent"), " | "))
		case "/v1/refunds":
			refundParents = append(refundParents, strings.Join(r.Header.Values("Traceparent"), " | "))
		}
	}
	if len(parents) != 3 {
		t.Fatalf("the upstream saw %d charges, want 3", len(parents))
	}
	for i, tp := range parents {
		if want := "00-" + e2eTrace + "-" + atts[i].SpanID + "-01"; tp != want {
			t.Errorf("charge attempt %d reached the upstream with traceparent %q, want only %q", i+1, tp, want)
		}
	}

	// The refund: its own trace, which the replay joined.
	var refundTrace string
	rc.mu.Lock()
	for _, s := range rc.spans {
		if s.Name == "callout.admission" && s.Attrs["callout.id"] == refund {
			refundTrace = s.TraceID
		}
	}
	rc.mu.Unlock()
	if refundTrace == "" || refundTrace == e2eTrace {
		t.Fatalf("no admission span of the refund in a trace of its own (%q)", refundTrace)
	}
	replays := rc.trace(refundTrace, "callout.replay")
	ratts := rc.trace(refundTrace, "callout.attempt")
	if len(replays) != 1 || len(ratts) != 3 {
		t.Fatalf("the refund's trace holds %d replay and %d attempt spans, want 1 and 3", len(replays), len(ratts))
	}
	last := ratts[2]
	if replays[0].Attrs["callout.replay_of"] != refund || replays[0].Attrs["callout.id"] != replayID ||
		last.ParentID != replays[0].SpanID || last.Attrs["callout.attempt.kind"] != "replay" ||
		last.Attrs["callout.id"] != replayID || last.Attrs["callout.outcome"] != "success" {
		t.Errorf("replay span %v, its attempt %v (parent %s)", replays[0].Attrs, last.Attrs, last.ParentID)
	}
	if dl := ratts[1]; dl.Attrs["callout.state"] != "dead_lettered" || dl.Attrs["callout.dead_letter_reason"] != "permanent" ||
		dl.StatusCode != "STATUS_CODE_ERROR" {
		t.Errorf("dead-lettering attempt %v status %s", dl.Attrs, dl.StatusCode)
	}
	for i, tp := range refundParents {
		if want := "00-" + refundTrace + "-" + ratts[i].SpanID + "-01"; tp != want {
			t.Errorf("refund attempt %d reached the upstream with traceparent %q, want %q", i+1, tp, want)
		}
	}

	// Logs: the attempt lines (the ingress's and the dispatcher's alike:
	// the two 503s and the 201, under the default log.access all) and the
	// dead letter carry trace_id.
	var attemptLines, deadLetterLines int
	for _, line := range strings.Split(p.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec["msg"] == "attempt" && rec["callout_id"] == charge:
			attemptLines++
			if rec["trace_id"] != e2eTrace {
				t.Errorf("attempt log line without the trace id: %s", line)
			}
		case rec["msg"] == "dead letter" && rec["callout_id"] == refund:
			deadLetterLines++
			if rec["trace_id"] != refundTrace {
				t.Errorf("dead-letter log line without the trace id: %s", line)
			}
		}
	}
	if attemptLines != 3 || deadLetterLines != 1 {
		t.Errorf("%d attempt lines of the charge and %d dead-letter lines of the refund, want 3 and 1",
			attemptLines, deadLetterLines)
	}
}
