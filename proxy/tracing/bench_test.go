package tracing_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
)

// BenchmarkKeyedCalloutTracing is the tracing work of one keyed callout
// whose first attempt succeeds, alone: read the caller's traceparent,
// the admission span, the stored context, one attempt span with its
// attributes, the upstream's traceparent, the log attribute. Off is the
// nil Tracer of a no-op provider (tracing.endpoint empty).
// deploy/bench/BENCHMARKS.md "Tracing" cites it beside the ingress's
// BenchmarkIngressTracing (package proxy).
func BenchmarkKeyedCalloutTracing(b *testing.B) {
	for _, p := range tracingtest.Providers() {
		b.Run(p.Name, func(b *testing.B) {
			tp := p.New(b)
			tr := tracing.New(tp, propagation.TraceContext{})
			prop := tr.Propagator()
			in := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}}
			now := time.Now()
			comp := policy.Completion{Action: policy.ActionSucceed}
			res := &policy.Response{Status: 200, Header: http.Header{}}
			upstream, _ := url.Parse("https://api.example.com")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ctx := tr.StartAdmission(context.Background(), in, http.MethodPost)
				stored := tr.Encode(ctx)
				tr.Admitted(ctx, tracing.Admission{Result: tracing.AdmitAttempt, Endpoint: "payment-api",
					Issuer: "https://example.my.salesforce.com", CalloutID: "a1b2c3", Keyed: true})
				actx, span := tr.StartAttempt(ctx, tracing.AttemptStart{Endpoint: "payment-api", Upstream: upstream,
					CalloutID: "a1b2c3", Method: http.MethodPost, N: 1, Kind: policy.KindFirst, Mode: tracing.ModeSynchronous})
				if prop != nil {
					out := http.Header{}
					prop.Inject(actx, tracing.HeaderCarrier(out))
				}
				_ = tr.LogAttr(actx)
				if span != nil {
					e := tracing.Decided(policy.AttemptResult{Response: res}, policy.Classification{Outcome: policy.Success},
						comp, policy.Defaults(), now)
					e.State = policy.Succeeded
					span.EndAttempt(e)
				}
				tr.EndServer(ctx, http.StatusOK)
				_ = stored
			}
		})
	}
}
