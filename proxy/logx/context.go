package logx

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Every log line about a callout carries its callout_id and the caller's
// trace_id (contract §12 "log fields"), with the tracing exporter on or
// off: the code that handles a callout puts them in the context
// (WithCallout; FromHeader or WithTraceContext when tracing is off, the
// tracer's span otherwise) and logs with it (slog's …Context and LogAttrs
// calls); the handler of New adds them to each line that does not have
// them already.

// calloutKey carries a callout id in a context (WithCallout).
type calloutKey struct{}

// w3c is the W3C Trace Context propagator (traceparent, tracestate).
var w3c propagation.TraceContext

// WithCallout returns ctx whose log lines carry callout_id id.
func WithCallout(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, calloutKey{}, id)
}

// FromHeader returns ctx with the caller's trace context — h's traceparent
// (W3C Trace Context §3.2) and tracestate — as its remote span context, so
// that its log lines carry the caller's trace_id when tracing is off. ctx
// as it is when it has a valid span context already (the tracer's) or h no
// valid traceparent.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// WithTraceContext is FromHeader for a trace context as the store keeps it
// (policy.NewCallout.TraceContext: "traceparent[,tracestate]").
func WithTraceContext(ctx context.Context, stored string) context.Context {
	if stored == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	tp, ts, _ := strings.Cut(stored, ",")
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
}

// EncodeTrace is ctx's span context as the store keeps a trace context
// ("traceparent[,tracestate]", what WithTraceContext reads back); "" when
// ctx has none.
func EncodeTrace(ctx context.Context) string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	if c["traceparent"] == "" {
		return ""
	}
	if ts := c["tracestate"]; ts != "" {
		return c["traceparent"] + "," + ts
	}
	return c["traceparent"]
}

// contextHandler adds callout_id and trace_id from a line's context to
// the lines that lack them.
type contextHandler struct {
	next slog.Handler
	// has are the keys the logger's own attributes (WithAttrs) set.
	has []string
}

func (h *contextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	has := slices.Clone(h.has)
	for _, a := range as {
		has = append(has, a.Key)
	}
	return &contextHandler{next: h.next.WithAttrs(as), has: has}
}

func (h *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{next: h.next.WithGroup(name), has: h.has}
}

func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.next.Handle(ctx, r)
	}
	id, _ := ctx.Value(calloutKey{}).(string)
	sc := trace.SpanContextFromContext(ctx)
	if id == "" && !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	hasID, hasTrace := slices.Contains(h.has, "callout_id"), slices.Contains(h.has, "trace_id")
	r.Attrs(func(a slog.Attr) bool {
		hasID = hasID || a.Key == "callout_id"
		hasTrace = hasTrace || a.Key == "trace_id"
		return true
	})
	if id != "" && !hasID {
		r.AddAttrs(slog.String("callout_id", id))
	}
	if sc.IsValid() && !hasTrace {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.next.Handle(ctx, r)
}
