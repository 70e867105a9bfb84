package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// tracingShutdownTimeout bounds the flush of the spans still queued when
// the proxy stops.
const tracingShutdownTimeout = 5 * time.Second

// newTracing returns, for the build version, the TracerProvider every component gets (docs/tracing.md)
// and the function that flushes and stops it. With tracing.endpoint empty
// it is a no-op provider: tracing.New turns it into a nil Tracer, so no span
// is made and no trace context read, stored or sent. The propagator is W3C
// Trace Context. Nothing is registered globally (otel.SetTracerProvider is
// never called).
func newTracing(ctx context.Context, tc config.Tracing, version string, logger *slog.Logger) (trace.TracerProvider,
	propagation.TextMapPropagator, func(), error) {
	prop := propagation.TraceContext{}
	if !tc.Enabled() {
		return noop.NewTracerProvider(), prop, func() {}, nil
	}
	replica := tc.Replica
	if replica == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("tracing.replica is not set and the host name is unknown: %w", err)
		}
		replica = h
	}
	tp, err := tracing.NewProvider(ctx, tc, tracing.ProviderOptions{Logger: logger,
		Resource: tracing.Resource{ServiceName: tc.ServiceName, Version: version, Replica: replica}})
	if err != nil {
		return nil, nil, nil, err
	}
	logger.Info("tracing on", slog.String("endpoint", tc.Endpoint), slog.String("protocol", tc.Protocol),
		slog.Float64("sample_ratio", tc.SampleRatio), slog.String("service_name", tc.ServiceName),
		slog.String("replica", replica))
	return tp, prop, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			logger.Warn("flushing the last spans failed", slog.Any("error", err))
		}
	}, nil
}
