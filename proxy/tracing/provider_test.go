package tracing_test

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

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

// TestNewProviderExports: the provider of each protocol exports a span to
// a receiver on loopback — OTLP/HTTP protobuf on the configured path,
// OTLP/gRPC — with the resource attributes service.name, service.version
// and service.instance.id, and the sampler's decision.
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
			tr.EndAdmission(sctx, tracing.Admission{Result: tracing.AdmitScheduled, Endpoint: "payment-api"})
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			tt.got.mu.Lock()
			defer tt.got.mu.Unlock()
			if len(tt.got.reqs) != 1 {
				t.Fatalf("%d export requests, want 1", len(tt.got.reqs))
			}
			rs := tt.got.reqs[0].GetResourceSpans()[0]
			res := map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				res[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			if res["service.name"] != "callout-proxy" || res["service.version"] != "v1.2.3" || res["service.instance.id"] != "pod-1" {
				t.Errorf("resource %v", res)
			}
			s := rs.GetScopeSpans()[0].GetSpans()[0]
			if s.GetName() != tracing.SpanAdmission || hex.EncodeToString(s.GetTraceId()) != callerTrace {
				t.Errorf("span %s in trace %x", s.GetName(), s.GetTraceId())
			}
		})
	}
}
