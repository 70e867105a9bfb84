package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// calloutPrefix is the path under which callouts arrive; the Named
// Credential's URL is https://<proxy>/callout (SPEC §4).
const calloutPrefix = "/callout/"

// handleCallout serves ANY /callout/{endpoint}/{path...} (SPEC §4): auth
// before the body is read, the allow-list, path checks, the body limit, one
// attempt, and the outcome class on every answer.
func (s *Server) handleCallout() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, suffix, err := splitCalloutPath(r.URL.EscapedPath())
		if err != nil {
			s.reject(w, r, "", err)
			return
		}
		caller, err := s.d.Callers.Verify(r.Header.Get("Authorization"))
		if err != nil {
			s.reject(w, r, "", err)
			return
		}
		ep, ok := s.d.Config.Endpoint(name)
		if !ok {
			s.reject(w, r, "", problem.Errorf(problem.UnknownEndpoint,
				"endpoint "+strconv.Quote(name)+" is not configured"))
			return
		}
		if err := s.d.Callers.AllowedOn(caller, ep); err != nil {
			s.reject(w, r, ep.Name, err)
			return
		}
		if _, err := forward.UpstreamURL(ep.BaseURL, suffix, r.URL.RawQuery); err != nil {
			s.reject(w, r, ep.Name, err)
			return
		}
		if isWrite(r.Method) {
			if err := s.pingStore(r.Context()); err != nil {
				s.reject(w, r, ep.Name, problem.Wrap(problem.StoreUnavailable,
					"the callout store (Redis) is unreachable; writes are not forwarded", err))
				return
			}
		}
		body, err := readBody(w, r, s.d.Config.Policy.MaxRequestBytes)
		if err != nil {
			s.reject(w, r, ep.Name, err)
			return
		}
		req := &forward.Request{
			Method: r.Method, Path: suffix, RawQuery: r.URL.RawQuery,
			Header: r.Header, Body: body,
		}
		ctx := r.Context()
		if isWrite(r.Method) {
			// A write's attempt runs to its own limit even if the caller
			// hangs up: its outcome must be recorded.
			ctx = context.WithoutCancel(ctx)
		}
		att := s.d.Upstream.Do(ctx, ep, req)
		var pe *problem.Error
		if errors.As(att.Err, &pe) {
			// Refused before anything was dispatched (blocked address,
			// unresolvable injected header): not an attempt.
			s.reject(w, r, ep.Name, pe)
			return
		}
		cls := s.observe(ep, att, "first")
		s.respond(w, ep, att, cls)
	}
}

// storeCheckTimeout bounds one reachability check of Redis (/readyz and
// the write path), so a hung Redis answers 503 store-unavailable well within
// Apex's default 10 s callout timeout and a probe's timeout.
const storeCheckTimeout = time.Second

// pingStore checks that Redis answers within storeCheckTimeout.
func (s *Server) pingStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	return s.d.Store.Ping(ctx)
}

// observe classifies an attempt, counts it in the metrics and logs it.
func (s *Server) observe(ep *config.Endpoint, att forward.Attempt, kind string) policy.Classification {
	status := 0
	if att.Response != nil {
		status = att.Response.Status
	}
	cls := policy.Classify(status, att.Err)
	s.d.Metrics.Attempts.WithLabelValues(ep.Name, string(cls.Outcome), kind).Inc()
	s.d.Metrics.AttemptDuration.WithLabelValues(ep.Name, string(cls.Outcome)).Observe(att.Duration.Seconds())
	s.d.Logger.Info("attempt",
		slog.String("endpoint", ep.Name), slog.String("kind", kind),
		slog.Int("status", status), slog.String("outcome", string(cls.Outcome)),
		slog.String("reason", cls.Reason), slog.Int64("duration_ms", att.Duration.Milliseconds()))
	return cls
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

// proxyOwned reports the response fields of SPEC §2, §4 and §5 that only
// the proxy sets (canonical names, as the forwarder returns them): an
// upstream sending one, by accident or to mislead the caller, must not be
// believed.
func proxyOwned(canonical string) bool {
	switch canonical {
	case "Callout-Outcome", "Callout-Id", "Callout-Record", "Idempotent-Replayed":
		return true
	}
	return false
}

// writeUpstream passes an upstream response through with its outcome class.
// The forwarder already removed hop-by-hop headers and set Content-Length
// (left as the upstream sent it for HEAD, 1xx, 204 and 304). A response
// without Content-Type keeps none: net/http would otherwise sniff one from
// the body and invent a type the upstream never declared. The fields the
// proxy speaks for itself (proxyOwned) are never taken from the upstream.
func writeUpstream(w http.ResponseWriter, resp *forward.Response, out policy.Outcome) {
	h := w.Header()
	for k, vs := range resp.Header {
		if !proxyOwned(k) {
			h[k] = append([]string(nil), vs...)
		}
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // present but empty: net/http sends none and does not sniff
	}
	h.Set("Callout-Outcome", string(out))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// reject counts, logs and answers a refusal before dispatch.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, endpoint string, err error) {
	pe := problem.From(err)
	s.d.Metrics.Rejected.WithLabelValues(endpoint, string(pe.Code)).Inc()
	level := slog.LevelInfo
	if pe.Code.Status() >= 500 {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("endpoint", endpoint), slog.String("method", r.Method),
		slog.String("code", string(pe.Code)), slog.String("detail", pe.Detail)}
	if pe.Err != nil {
		attrs = append(attrs, slog.String("cause", pe.Err.Error()))
	}
	s.d.Logger.LogAttrs(r.Context(), level, "rejected", attrs...)
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

// isWrite reports whether method is a write in SPEC §4's sense: anything
// but GET, HEAD and OPTIONS.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// readBody reads the request body up to limit bytes; a larger body is a
// 413 rejection (SPEC §2 "body too large").
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	tooLarge := problem.Errorf(problem.BodyTooLarge,
		"the request body is larger than max_request_bytes ("+strconv.FormatInt(limit, 10)+" bytes)")
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, problem.Wrap(problem.InvalidRequest, "the request body could not be read", err)
	}
	return b, nil
}
