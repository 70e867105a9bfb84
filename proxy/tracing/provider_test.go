package tracing_test

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// received collects the export requests an OTLP receiver got.
type received struct {
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
}

func (r *received) add(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
}

// grpcReceiver is an OTLP/gRPC TraceService on loopback.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	got *received
}

func (g grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.got.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// upstreamURL is an endpoint's base URL with a port of its own.
var upstreamURL, _ = url.Parse("https://api.example.com:8443/v2")

// otlpAttrs renders exported attributes as strings (ints in decimal).
func otlpAttrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		if _, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
			m[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		} else {
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// TestNewProviderExports: the provider of each protocol exports to a
// receiver on loopback — OTLP/HTTP protobuf on the configured path,
// OTLP/gRPC — with the resource attributes service.name, service.version
// and service.instance.id; the server span carries the answer's status and
// holds the synchronous attempt, whose span names the upstream's host and
// port.
func TestNewProviderExports(t *testing.T) {
	httpGot := &received{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/otlp/v1/traces" {
			t.Errorf("path %s", r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Error(err)
		}
		httpGot.add(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer hs.Close()
	grpcGot := &received{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, grpcReceiver{got: grpcGot})
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()

	for _, tt := range []struct {
		name string
		tc   config.Tracing
		got  *received
	}{
		{"http/protobuf", config.Tracing{Endpoint: hs.URL + "/otlp/v1/traces", Protocol: config.TracingHTTP, SampleRatio: 1}, httpGot},
		{"grpc", config.Tracing{Endpoint: "http://" + l.Addr().String(), Protocol: config.TracingGRPC, SampleRatio: 1}, grpcGot},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tp, err := tracing.NewProvider(ctx, tt.tc, tracing.ProviderOptions{Sync: true,
				Resource: tracing.Resource{ServiceName: "callout-proxy", Version: "v1.2.3", Replica: "pod-1"}})
			if err != nil {
				t.Fatal(err)
			}
			tr := tracing.New(tp, nil)
			sctx := tr.StartAdmission(ctx, http.Header{"Traceparent": {callerParent}}, "POST")
			tr.Admitted(sctx, tracing.Admission{Result: tracing.AdmitAttempt, Endpoint: "payment-api"})
			_, attempt := tr.StartAttempt(sctx, tracing.AttemptStart{Endpoint: "payment-api", Upstream: upstreamURL,
				Method: "POST", N: 1, Kind: policy.KindFirst, Mode: tracing.ModeSynchronous})
			attempt.EndAttempt(tracing.AttemptEnd{Status: 201, Outcome: policy.Success, Reason: policy.ReasonStatus2xx})
			tr.EndServer(sctx, http.StatusCreated)
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			tt.got.mu.Lock()
			defer tt.got.mu.Unlock()
			// Sync: one export request per span, in the order they ended:
			// the attempt, then the server span around it.
			if len(tt.got.reqs) != 2 {
				t.Fatalf("%d export requests, want 2", len(tt.got.reqs))
			}
			var spans []*tracepb.Span
			for _, req := range tt.got.reqs {
				rs := req.GetResourceSpans()[0]
				res := map[string]string{}
				for _, kv := range rs.GetResource().GetAttributes() {
					res[kv.GetKey()] = kv.GetValue().GetStringValue()
				}
				if res["service.name"] != "callout-proxy" || res["service.version"] != "v1.2.3" || res["service.instance.id"] != "pod-1" {
					t.Errorf("resource %v", res)
				}
				spans = append(spans, rs.GetScopeSpans()[0].GetSpans()...)
			}
			if len(spans) != 2 {
				t.Fatalf("%d spans exported, want 2", len(spans))
			}
			att, srv := spans[0], spans[1]
			if srv.GetName() != tracing.SpanAdmission || hex.EncodeToString(srv.GetTraceId()) != callerTrace {
				t.Errorf("span %s in trace %x", srv.GetName(), srv.GetTraceId())
			}
			sa, aa := otlpAttrs(srv.GetAttributes()), otlpAttrs(att.GetAttributes())
			if sa["http.response.status_code"] != "201" || aa["server.address"] != "api.example.com" || aa["server.port"] != "8443" {
				t.Errorf("server span attributes %v, attempt span attributes %v", sa, aa)
			}
			if string(att.GetParentSpanId()) != string(srv.GetSpanId()) ||
				att.GetStartTimeUnixNano() < srv.GetStartTimeUnixNano() || att.GetEndTimeUnixNano() > srv.GetEndTimeUnixNano() {
				t.Errorf("attempt [%d, %d] parent %x: want a child inside the server span [%d, %d] %x",
					att.GetStartTimeUnixNano(), att.GetEndTimeUnixNano(), att.GetParentSpanId(),
					srv.GetStartTimeUnixNano(), srv.GetEndTimeUnixNano(), srv.GetSpanId())
			}
		})
	}
}
