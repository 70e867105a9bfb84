package proxy

import (
	"context"
	"net/http"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// The ingress's spans (docs/tracing.md): the admission span starts in
// handleCallout and ends where the admission is decided; each synchronous
// or inline attempt has its own (the attempt runner's). With tracing off
// (s.tr nil) every helper returns at once.

// admitted ends the admission span of in's request (tracing on) with
// result and the callout's id ("" for a read).
func (s *Server) admitted(r *http.Request, in *inbound, result tracing.AdmissionResult, id string, gate policy.GateState) {
	if s.tr == nil {
		return
	}
	prefer := ""
	switch {
	case in.prefs.respondAsync:
		prefer = "respond-async"
	case in.prefs.wait > 0:
		prefer = "wait"
	}
	s.tr.EndAdmission(r.Context(), tracing.Admission{Result: result, Endpoint: in.ep.Name, Issuer: in.caller.Issuer,
		CalloutID: id, Keyed: in.key != "", Prefer: prefer, Gate: gate})
}

// startReadAttempt starts the span of a read's attempt (tracing on): a
// read has no record (kind first or probe). The recorded attempts' spans
// are the attempt runner's (proxy/attempt).
func (s *Server) startReadAttempt(ctx context.Context, r *http.Request, in *inbound,
	kind policy.Kind) (context.Context, *tracing.Span) {
	if s.tr == nil {
		return ctx, nil
	}
	a := tracing.AttemptStart{Endpoint: in.ep.Name, Method: r.Method, Kind: kind, Mode: tracing.ModeSynchronous}
	if in.ep.BaseURL != nil {
		a.Host = in.ep.BaseURL.Hostname()
	}
	return s.tr.StartAttempt(ctx, a)
}
