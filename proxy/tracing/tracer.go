// Package tracing is the proxy's OpenTelemetry tracing (
// docs/tracing.md): W3C Trace Context (https://www.w3.org/TR/trace-context/)
// read from the caller, kept with a callout in the store so that its
// dispatched attempts and replays join the trace that accepted it, and the
// spans of a callout's admission, of each attempt and of each Salesforce
// write batch, with attributes that name routes and results, never a
// secret, a body, a query or a header value.
//
// The TracerProvider and the propagator come from the composition root
// (cmd/callout-proxy): nothing here is global, and otel.SetTracerProvider is
// never called. A nil *Tracer is tracing off: every method returns at once,
// so off costs one nil check per call.
package tracing

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span the proxy makes.
const ScopeName = "github.com/calloutproxy/callout-proxy"

// Tracer makes the proxy's spans. A nil *Tracer is valid and makes none.
// It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// The span start options, built once (an option is an interface value:
	// building one per span allocates).
	server, client, internal, root trace.SpanStartOption
}

// New returns a Tracer over tp, or nil — tracing off — when tp is nil or a
// no-op provider (go.opentelemetry.io/otel/trace/noop). prop reads the
// caller's context and writes the upstream's; nil: W3C Trace Context
// (propagation.TraceContext).
func New(tp trace.TracerProvider, prop propagation.TextMapPropagator) *Tracer {
	if tp == nil {
		return nil
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return &Tracer{tracer: tp.Tracer(ScopeName), prop: prop,
		server: trace.WithSpanKind(trace.SpanKindServer), client: trace.WithSpanKind(trace.SpanKindClient),
		internal: trace.WithSpanKind(trace.SpanKindInternal), root: trace.WithNewRoot()}
}

// HeaderCarrier is propagation.HeaderCarrier without the allocation of
// canonicalising the W3C field names on every Get and Set: "traceparent"
// and "tracestate" map straight to the canonical keys net/http stores.
type HeaderCarrier http.Header

// Get returns the first value of key.
func (c HeaderCarrier) Get(key string) string {
	if v := c[canonical(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces key's values with value.
func (c HeaderCarrier) Set(key, value string) { c[canonical(key)] = []string{value} }

// Keys lists the keys of the carrier.
func (c HeaderCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// canonical is http.CanonicalHeaderKey, with the two trace fields known.
func canonical(key string) string {
	switch key {
	case traceparent:
		return "Traceparent"
	case tracestate:
		return "Tracestate"
	}
	return http.CanonicalHeaderKey(key)
}

// Propagator is the propagator the forwarder injects each attempt's
// context with (forward.Options.Propagator); nil when t is nil.
func (t *Tracer) Propagator() propagation.TextMapPropagator {
	if t == nil {
		return nil
	}
	return t.prop
}

// Extract returns ctx with the caller's trace context from h as the remote
// parent (W3C Trace Context §3.2, §3.3), or ctx unchanged when h carries
// none, an invalid one, or more than one traceparent field (§3.2: a
// receiver MUST NOT guess between them). A tracestate longer than
// MaxTraceState is shortened as §3.3.1.5 allows (ShortTraceState).
func (t *Tracer) Extract(ctx context.Context, h http.Header) context.Context {
	if t == nil || len(h["Traceparent"]) > 1 {
		return ctx
	}
	ctx = t.prop.Extract(ctx, HeaderCarrier(h))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ctx
	}
	if ts := sc.TraceState(); ts.Len() > 0 && len(ts.String()) > MaxTraceState {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc.WithTraceState(ShortTraceState(ts)))
	}
	return ctx
}

// The W3C Trace Context fields (§3.2, §3.3).
const (
	traceparent = "traceparent"
	tracestate  = "tracestate"
)

// MaxTraceState is the longest tracestate, in bytes, the proxy keeps with a
// callout and sends upstream. W3C Trace Context §3.3.1.5 asks for at least
// 512 characters to be propagated; 256 keeps a pending callout's record
// small (its bytes count toward the endpoint's backlog cap) and holds any
// two or three vendors' entries.
const MaxTraceState = 256

// ShortTraceState drops tracestate members as W3C Trace Context §3.3.1.5
// says, until the list fits in MaxTraceState bytes: first every member
// longer than 128 characters, then members from the end of the list.
func ShortTraceState(ts trace.TraceState) trace.TraceState {
	type member struct{ k, v string }
	var kept []member
	ts.Walk(func(k, v string) bool {
		if len(k)+1+len(v) <= 128 {
			kept = append(kept, member{k, v})
		}
		return true
	})
	// Members must keep their order; Insert puts a member first, so the
	// ones that fit are inserted from the last to the first.
	fit, size := 0, -1
	for _, m := range kept {
		n := len(m.k) + 1 + len(m.v) + 1 // the member and its comma
		if size+n > MaxTraceState {
			break
		}
		size += n
		fit++
	}
	out := trace.TraceState{}
	for i := fit - 1; i >= 0; i-- {
		var err error
		if out, err = out.Insert(kept[i].k, kept[i].v); err != nil {
			return trace.TraceState{}
		}
	}
	return out
}

// Encode returns the trace context of ctx's span as a callout keeps it in
// the store (policy.NewCallout.TraceContext): its traceparent (W3C Trace
// Context §3.2, version 00, 55 characters), followed by "," and its
// tracestate when it has one ("00-<trace id>-<span id>-<flags>[,k=v,…]";
// traceparent has no comma, so the first one splits them). "" when t is nil
// or ctx has no valid span context.
func (t *Tracer) Encode(ctx context.Context) string {
	if t == nil {
		return ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	ts := sc.TraceState().String()
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom)
	b := make([]byte, 0, 55+1+len(ts))
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(flags)})
	if ts != "" {
		b = append(append(b, ','), ts...)
	}
	return string(b)
}

// Resume returns ctx with the trace context stored by Encode as the remote
// parent, so that the spans made under it join the trace that accepted the
// callout, on any replica and at any later time. ctx is returned unchanged
// when t is nil or stored is empty or invalid.
func (t *Tracer) Resume(ctx context.Context, stored string) context.Context {
	if t == nil || stored == "" {
		return ctx
	}
	tp, ts, _ := strings.Cut(stored, ",")
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{traceparent: tp, tracestate: ts})
}

// LogAttr is the trace_id log attribute of ctx's span (32 lower-case hex
// digits, as in traceparent), for every log line of a traced request; an
// empty slog.Attr, which slog handlers leave out, when t is nil or ctx is
// not traced.
func (t *Tracer) LogAttr(ctx context.Context) slog.Attr {
	if t == nil {
		return slog.Attr{}
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return slog.Attr{}
	}
	return slog.String("trace_id", sc.TraceID().String())
}
