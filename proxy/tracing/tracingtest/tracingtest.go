// Package tracingtest is what the tests of the spans (proxy/tracing, the
// ingress, the replay service, the Salesforce writer) share to record and
// read them: a provider whose spans a recorder keeps, a span's attributes
// by key, the check that every attribute key is one docs/tracing.md
// lists (tracing.Keys), and the three providers the tracing benchmarks
// compare. It is imported by tests only.
package tracingtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// Recorder returns a TracerProvider that samples as the binary does at
// tracing.sample_ratio ratio (tracing.Sampler, docs/tracing.md) and the
// recorder of the spans it ends. The provider is shut down when t ends.
func Recorder(t testing.TB, ratio float64) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSampler(tracing.Sampler(ratio)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, sr
}

// Attrs returns the attributes of s by key.
func Attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// KeysKnown fails t for each attribute of spans whose key is not among
// tracing.Keys (the keys docs/tracing.md lists).
func KeysKnown(t testing.TB, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	known := map[attribute.Key]bool{}
	for _, k := range tracing.Keys {
		known[k] = true
	}
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if !known[kv.Key] {
				t.Errorf("span %s: attribute %s is not in tracing.Keys", s.Name(), kv.Key)
			}
		}
	}
}

// Provider is one TracerProvider a tracing benchmark measures: its name
// (the sub-benchmark's) and a constructor whose provider is shut down when
// the benchmark ends.
type Provider struct {
	Name string
	New  func(testing.TB) trace.TracerProvider
}

// Providers are the three settings the tracing benchmarks compare
// (deploy/bench/BENCHMARKS.md "Tracing"): "off", tracing.endpoint empty (a
// no-op provider); "ratio0" and "ratio1", the SDK's provider at
// sample_ratio 0 (spans made, none recorded) and 1 (every span recorded
// and batched to an exporter that discards them: the SDK's cost without a
// collector's network).
func Providers() []Provider {
	sdk := func(ratio float64) func(testing.TB) trace.TracerProvider {
		return func(tb testing.TB) trace.TracerProvider {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(tracing.Sampler(ratio)))
			tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return tp
		}
	}
	return []Provider{
		{"off", func(testing.TB) trace.TracerProvider { return noop.NewTracerProvider() }},
		{"ratio0", sdk(0)},
		{"ratio1", sdk(1)},
	}
}

// discard is an exporter that takes every batch and keeps nothing.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
