package proxy

import (
	"context"
	"net/http"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// The ingress's spans (docs/tracing.md): the server span (callout.admission)
// starts in handleCallout and ends when the answer is written, with its
// status; the admission's result is recorded on it where it is decided;
// each synchronous or inline attempt is a child span inside it (the
// attempt runner's). With tracing off (s.tr nil) every helper returns at
// once.

// admitted records on the server span of in's request (tracing on) how
// its admission ended: result and the callout's id ("" for a read).
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
	s.tr.Admitted(r.Context(), tracing.Admission{Result: result, Endpoint: in.ep.Name, Issuer: in.caller.Issuer,
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
	return s.tr.StartAttempt(ctx, tracing.AttemptStart{Endpoint: in.ep.Name, Upstream: in.ep.BaseURL,
		Method: r.Method, Kind: kind, Mode: tracing.ModeSynchronous})
}

// statusWriter records the status of the answer for the server span
// (tracing on only): the first WriteHeader's, or 200 at the first Write.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
