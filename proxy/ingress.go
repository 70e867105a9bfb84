package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// calloutPrefix is the path under which callouts arrive; the Named
// Credential's URL is https://<proxy>/callout (contract §4).
const calloutPrefix = "/callout/"

// handleCallout serves ANY /callout/{endpoint}/{path...} (contract §4): auth
// before the body is read, the allow-list, path and key checks, the body
// limit, then the read or the write path. Every answer carries its outcome.
// The request's headers, body and buffered response are held in the memory
// budget (holdRequest) until its answer is written.
//
// With tracing on, the server span starts here, its parent the caller's
// traceparent (or a new trace), and ends once the answer is written, with
// its status; the paths below record the admission on it where it is
// decided, and the attempts are its children, inside it.
func (s *Server) handleCallout() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The request's context is built whole first (its trace, then its
		// holder), so r is copied once (WithContext), not once a step.
		var ctx context.Context
		if s.tr != nil {
			ctx = s.tr.StartAdmission(r.Context(), r.Header, r.Method)
			sw := &statusWriter{ResponseWriter: w}
			w = sw
			defer func() { s.tr.EndServer(r.Context(), sw.status) }()
		} else {
			// Tracing off: the caller's traceparent still names the
			// trace of every log line about this request (contract §12).
			ctx = logx.FromHeader(r.Context(), r.Header)
		}
		ctx, release, err := s.holdRequest(ctx, r)
		defer release() // after the answer is written: the budget counts it until then
		r = r.WithContext(ctx)
		if err != nil {
			s.reject(w, r, "", err)
			return
		}
		in, err := s.admitRequest(w, r)
		if err != nil {
			endpoint := ""
			if in != nil {
				endpoint = in.ep.Name
			}
			s.reject(w, r, endpoint, err)
			return
		}
		// Reads take the recorded path too when the caller asked for
		// asynchronous handling or inline retries (contract §4 Prefer rows).
		if policy.IsWrite(r.Method) || in.prefs.respondAsync || in.prefs.wait > 0 {
			s.write(w, r, in)
			return
		}
		s.read(w, r, in)
	}
}

// inbound is a callout request that passed every check before dispatch.
type inbound struct {
	ep     *config.Endpoint
	caller auth.Caller
	suffix string
	key    string
	source string
	prefs  preferences
	body   []byte
	start  time.Time
	url    *url.URL // forward.UpstreamURL of ep, suffix and the query: checked once, sent as it is
}

// request is the forwarder's view of in.
func (in *inbound) request(r *http.Request) *forward.Request {
	return &forward.Request{Method: r.Method, Path: in.suffix, RawQuery: r.URL.RawQuery,
		Header: r.Header, Body: in.body, URL: in.url}
}

// verifyCaller verifies r's bearer token (auth.Verifier.Verify: errors are
// *problem.Error) and, verified, charges the request to the caller's
// organisation, its JWT issuer: from here on its bytes count toward the
// organisation's share of the memory budget
// (limits.max_inflight_bytes_per_issuer) and its connection toward its
// share of the listener's connections (limits.max_connections_per_issuer),
// idle after it included, so that an organisation's status polls and
// writes are never in the unverified group (contract §10).
func (s *Server) verifyCaller(r *http.Request) (auth.Caller, error) {
	caller, err := s.d.Callers.Verify(r.Header.Get("Authorization"))
	if err != nil {
		return caller, err
	}
	limit.HolderFrom(r.Context()).Assign(caller.Issuer)
	limit.Running(r.Context(), caller.Issuer)
	return caller, nil
}

// admitRequest runs the checks of contract §4 that come before dispatch, in an
// order that reads the body last: path, token, endpoint, issuer, escape,
// key rules, source record, then the body within max_request_bytes. The
// returned inbound is non-nil once the endpoint is known.
func (s *Server) admitRequest(w http.ResponseWriter, r *http.Request) (*inbound, error) {
	name, suffix, err := splitCalloutPath(r.URL.EscapedPath())
	if err != nil {
		return nil, err
	}
	caller, err := s.verifyCaller(r)
	if err != nil {
		return nil, err
	}
	ep, ok := s.d.Config.Endpoint(name)
	if !ok {
		return nil, problem.Errorf(problem.UnknownEndpoint, "endpoint "+strconv.Quote(name)+" is not configured")
	}
	in := &inbound{ep: ep, caller: caller, suffix: suffix, start: s.d.Now(),
		prefs: parsePrefer(r.Header.Values("Prefer"))}
	if err := s.d.Callers.AllowedOn(caller, ep); err != nil {
		return in, err
	}
	if in.url, err = forward.UpstreamURL(ep.BaseURL, suffix, r.URL.RawQuery); err != nil {
		return in, err
	}
	if in.key, err = parseIdempotencyKey(r.Header.Values("Idempotency-Key")); err != nil {
		return in, err
	}
	if in.key == "" && (r.Method == http.MethodPost || r.Method == http.MethodPatch) {
		// A refused write without a key is the case the "missing" count
		// exists for (Apex code that forgot its key), so it is counted too.
		s.d.Metrics.Idempotency.WithLabelValues("missing").Inc()
		return in, problem.Errorf(problem.IdempotencyKeyMissing, r.Method+
			" needs an Idempotency-Key header (POST and PATCH are not idempotent, so the proxy "+
			"only retries them with a key the upstream can deduplicate on)")
	}
	if in.source, err = sourceRecord(r.Header.Get("Callout-Source-Record")); err != nil {
		return in, err
	}
	if in.body, err = s.readBody(w, r); err != nil {
		return in, err
	}
	return in, nil
}

// respond sends the upstream's answer through, or a problem document when
// there was none.
func (s *Server) respond(w http.ResponseWriter, ep *config.Endpoint,
	att forward.Attempt, cls policy.Classification) {
	if att.Response != nil {
		writeUpstream(w, att.Response, cls.Outcome)
		return
	}
	switch {
	case errors.Is(att.Err, policy.ErrResponseTooLarge):
		problem.Write(w, &problem.Error{Code: problem.ResponseTooLarge, Outcome: policy.Permanent,
			Detail: "the upstream response is larger than max_response_bytes (" +
				strconv.FormatInt(s.d.Config.Policy.MaxResponseBytes, 10) + " bytes)"})
	case strings.HasSuffix(cls.Reason, "_timeout"):
		problem.Write(w, &problem.Error{Code: problem.UpstreamTimeout, Outcome: cls.Outcome,
			Detail: "the upstream did not answer within the " + strings.TrimSuffix(cls.Reason, "_timeout") +
				" limit of endpoint " + ep.Name})
	default:
		problem.Write(w, &problem.Error{Code: problem.UpstreamUnavailable, Outcome: cls.Outcome,
			Detail: "no response from endpoint " + ep.Name + " (" + cls.Reason + ")"})
	}
}

// proxyOwned reports the response fields only the proxy sets (canonical
// names): forward.ProxyOwned. The forwarder drops them from upstream
// responses already; a stored response recorded before it did is filtered
// again on replay.
func proxyOwned(canonical string) bool { return forward.ProxyOwned(canonical) }

// writeUpstream passes an upstream response through with its outcome class.
// The forwarder already removed hop-by-hop headers and set Content-Length
// (left as the upstream sent it for HEAD, 1xx, 204 and 304). A response
// without Content-Type keeps none: net/http would otherwise sniff one from
// the body and invent a type the upstream never declared. The fields the
// proxy speaks for itself (proxyOwned) are never taken from the upstream.
func writeUpstream(w http.ResponseWriter, resp *forward.Response, out policy.Outcome) {
	h := w.Header()
	// The values are copied into one array, Callout-Outcome's last, each
	// field a full slice of it (its capacity its length, so an append to
	// one copies and never runs into the next): one allocation, not one
	// per field.
	n := 1
	for _, vs := range resp.Header {
		n += len(vs)
	}
	vals := make([]string, 0, n)
	for k, vs := range resp.Header {
		if !proxyOwned(k) {
			start := len(vals)
			vals = append(vals, vs...)
			h[k] = vals[start:len(vals):len(vals)]
		}
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // present but empty: net/http sends none and does not sniff
	}
	vals = append(vals, string(out))
	h["Callout-Outcome"] = vals[len(vals)-1 : len(vals) : len(vals)] // h.Set's canonical name, its value in the array
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// reject counts, logs (sampled: rejectionLog) and answers a refusal before
// dispatch.
//
// With tracing on, a refusal before dispatch records the admission
// (rejected, its problem code) on the server span (a refusal after an
// attempt keeps the admission recorded first), and the log line carries
// the trace_id.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, endpoint string, err error) {
	pe := problem.From(err)
	s.d.Metrics.Rejected.WithLabelValues(endpoint, string(pe.Code)).Inc()
	s.tr.Admitted(r.Context(), tracing.Admission{Result: tracing.AdmitRejected, Endpoint: endpoint,
		Problem: string(pe.Code)})
	level := slog.LevelInfo
	if pe.Code.Status() >= 500 {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("endpoint", endpoint), slog.String("method", r.Method),
		slog.String("code", string(pe.Code)), slog.String("detail", pe.Detail)}
	if pe.Err != nil {
		attrs = append(attrs, slog.String("cause", pe.Err.Error()))
	}
	if pe.CalloutID != "" { // a refusal about a callout (a repeat of a dead letter's key): contract §12
		attrs = append(attrs, slog.String("callout_id", pe.CalloutID))
	}
	if a := s.tr.LogAttr(r.Context()); a.Key != "" {
		attrs = append(attrs, a)
	}
	s.rejections.log(r.Context(), level, rejectionKey{endpoint, string(pe.Code)}, attrs)
	problem.Write(w, pe)
}

// splitCalloutPath splits the escaped path /callout/{endpoint}{suffix}.
// The suffix stays escaped; forward.UpstreamURL checks it.
func splitCalloutPath(escaped string) (name, suffix string, err error) {
	rest, ok := strings.CutPrefix(escaped, calloutPrefix)
	if !ok {
		return "", "", problem.Errorf(problem.NotFound, "callouts are sent to /callout/{endpoint}/{path}")
	}
	name, suffix, _ = strings.Cut(rest, "/")
	if suffix != "" || strings.HasSuffix(rest, "/") {
		suffix = "/" + suffix
	}
	if name == "" {
		return "", "", problem.Errorf(problem.UnknownEndpoint, "the path names no endpoint")
	}
	return name, suffix, nil
}
