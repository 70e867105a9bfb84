package proxy

import (
	"context"
	"net/http"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// The ingress's spans (docs/tracing.md): the admission span starts in
// handleCallout and ends where the admission is decided; each synchronous
// or inline attempt has its own. With tracing off (s.tr nil) every helper
// returns at once.

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

// startAttempt starts the span of an attempt of in's request (tracing on):
// mode is tracing.ModeSynchronous or ModeInline, cl nil for a read
// without a record (kind first or probe).
func (s *Server) startAttempt(ctx context.Context, r *http.Request, in *inbound, cl *policy.Claimed,
	kind policy.Kind, mode string) (context.Context, *tracing.Span) {
	if s.tr == nil {
		return ctx, nil
	}
	a := tracing.AttemptStart{Endpoint: in.ep.Name, Method: r.Method, Kind: kind, Mode: mode}
	if in.ep.BaseURL != nil {
		a.Host = in.ep.BaseURL.Hostname()
	}
	if cl != nil {
		a.CalloutID, a.N = cl.ID, cl.Attempt
	}
	return s.tr.StartAttempt(ctx, a)
}

// attemptEnd is how a synchronous attempt ended, for its span: the
// policy's decision and the store's result (zero when the completion
// failed); the zero AttemptEnd when tracing is off.
func (s *Server) attemptEnd(att forward.Attempt, cls policy.Classification, comp policy.Completion,
	res policy.CompleteResult) tracing.AttemptEnd {
	if s.tr == nil {
		return tracing.AttemptEnd{}
	}
	e := tracing.Decided(att.Result(), cls, comp, s.d.Config.Policy, s.d.Now())
	e.State, e.DeadLetter = res.State, res.Reason
	return e
}
