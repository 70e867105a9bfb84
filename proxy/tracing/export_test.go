package tracing

import (
	"log/slog"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// NewLoggingExporter exposes loggingExporter to the external tests.
func NewLoggingExporter(e sdktrace.SpanExporter, log *slog.Logger, now func() time.Time) sdktrace.SpanExporter {
	return &loggingExporter{SpanExporter: e, log: log, now: now}
}
