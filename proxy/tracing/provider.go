package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// Resource names the process in every exported span (OpenTelemetry
// resource semantic conventions, "service").
type Resource struct {
	// ServiceName is service.name (tracing.service_name).
	ServiceName string
	// Version is service.version (the binary's version).
	Version string
	// Replica is service.instance.id (tracing.replica, else the host name).
	Replica string
}

// ProviderOptions are what NewProvider needs besides the configuration.
type ProviderOptions struct {
	Resource Resource
	// Logger receives the exporter's failures (a collector down or
	// refusing): the first at once, then one line a minute with a count,
	// never a span's content. Discarded if nil.
	Logger *slog.Logger
	// Now is the clock of that rate; time.Now if nil.
	Now func() time.Time
	// Sync exports each span as it ends instead of in batches (tests);
	// production uses the batch processor's defaults (batches of up to
	// 512 spans, at least every 5 s, a queue of 2048: spans beyond it are
	// dropped rather than slowing a callout down).
	Sync bool
}

// NewProvider returns the TracerProvider of the tracing section tc (which
// must be Enabled and valid, as config.Load leaves it): an OTLP exporter
// over http/protobuf or grpc to tc.Endpoint (TLS for https), the sampler of
// Sampler(tc.SampleRatio), and the resource of o. The exporter also reads
// the OTEL_EXPORTER_OTLP_HEADERS, _CERTIFICATE, _COMPRESSION and _TIMEOUT
// environment variables (the OpenTelemetry specification's exporter
// configuration); the endpoint and protocol are always the file's. Nothing
// is dialled here. Shut it down (Shutdown) to flush the spans still queued.
// Errors: the exporter's options.
func NewProvider(ctx context.Context, tc config.Tracing, o ProviderOptions) (*sdktrace.TracerProvider, error) {
	exp, err := newExporter(ctx, tc)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	logged := &loggingExporter{SpanExporter: exp, log: o.Logger, now: o.Now}
	if logged.log == nil {
		logged.log = slog.New(slog.DiscardHandler)
	}
	if logged.now == nil {
		logged.now = time.Now
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", o.Resource.ServiceName),
		attribute.String("service.version", o.Resource.Version),
		attribute.String("service.instance.id", o.Resource.Replica),
	)
	export := sdktrace.WithBatcher(logged)
	if o.Sync {
		export = sdktrace.WithSyncer(logged)
	}
	return sdktrace.NewTracerProvider(export, sdktrace.WithResource(res),
		sdktrace.WithSampler(Sampler(tc.SampleRatio))), nil
}

// Sampler is the proxy's sampler for a sample ratio r (tracing.sample_ratio):
// parent-based (the OpenTelemetry SDK's ParentBased) — a span whose parent
// was sampled is sampled, so a caller's sampled trace is always recorded
// and every span of a recorded trace is too — with TraceIDRatioBased(r) for
// roots and for remote parents not sampled. Apex records nothing itself
// and says so (traceparent flags 00), so r decides for it; since the
// ratio is a function of the trace id, every replica decides the same for
// every attempt of one callout, hours later too.
func Sampler(r float64) sdktrace.Sampler {
	ratio := sdktrace.TraceIDRatioBased(r)
	return sdktrace.ParentBased(ratio, sdktrace.WithRemoteParentNotSampled(ratio))
}

func newExporter(ctx context.Context, tc config.Tracing) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(tc.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing.endpoint: %w", err)
	}
	if tc.Protocol == config.TracingGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(tc.TracingPath())}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(ctx, opts...)
}

// exportLogEvery is how often repeated export failures are logged.
const exportLogEvery = time.Minute

// loggingExporter logs the failures of the exporter it wraps through the
// proxy's logger, at a rate, and reports success to the SDK, whose own
// error handler (a process-wide global) would otherwise print each one to
// stderr outside the JSON log. A failed batch is lost either way: the SDK
// does not retry a batch its exporter gave up on (the OTLP exporters retry
// within their timeout first).
type loggingExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	loggedAt time.Time
	failed   int // batches failed since loggedAt
}

func (e *loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	now := e.now()
	e.mu.Lock()
	e.failed++
	due := e.loggedAt.IsZero() || now.Sub(e.loggedAt) >= exportLogEvery
	n := e.failed
	if due {
		e.loggedAt, e.failed = now, 0
	}
	e.mu.Unlock()
	if due {
		e.log.Warn("exporting spans to the OTLP collector failed; these spans are lost",
			slog.Int("batches", n), slog.Int("spans", len(spans)), slog.Any("error", err))
	}
	return nil
}
