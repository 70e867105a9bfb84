package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// headerSize measures a request's header section as the limits count it:
// the number of field lines and, per line, name, value and 4 bytes (": "
// and CRLF), Host included (net/http moves it out of r.Header).
func headerSize(r *http.Request) (fields, size int) {
	for k, vs := range r.Header {
		for _, v := range vs {
			fields++
			size += len(k) + len(v) + 4
		}
	}
	if r.Host != "" {
		fields++
		size += len("Host") + len(r.Host) + 4
	}
	return fields, size
}

// limitHeaders refuses a callout-listener request whose header section is
// over limits.max_header_fields or limits.max_header_bytes with 431
// headers-too-large (RFC 6585 §5) and closes its connection. A header
// section so large that net/http refuses it first (over twice
// max_header_bytes, see config.Limits) never reaches it.
func (s *Server) limitHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lim := s.d.Config.Limits
		fields, size := headerSize(r)
		var pe *problem.Error
		switch {
		case lim.MaxHeaderFields > 0 && fields > lim.MaxHeaderFields:
			pe = problem.Errorf(problem.HeadersTooLarge, strconv.Itoa(fields)+
				" header fields; at most "+strconv.Itoa(lim.MaxHeaderFields)+" are accepted (limits.max_header_fields)")
		case lim.MaxHeaderBytes > 0 && size > lim.MaxHeaderBytes:
			pe = problem.Errorf(problem.HeadersTooLarge, "the header fields are "+strconv.Itoa(size)+
				" bytes; at most "+strconv.Itoa(lim.MaxHeaderBytes)+" are accepted (limits.max_header_bytes)")
		}
		if pe != nil {
			w.Header().Set("Connection", "close")
			s.reject(w, r, "", pe)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// holdRequest gives a callout request its share of the memory budget
// (limits.max_inflight_bytes): a Holder, carried in the returned context so
// the forwarder reserves the buffered response in it too, holding the
// request's header bytes already. The caller calls release once the answer
// is written. ctx is r's context as the ingress made it (its trace); on
// an error it is returned as it is. Errors: the overloaded problem.
func (s *Server) holdRequest(ctx context.Context, r *http.Request) (_ context.Context, release func(), err error) {
	h := s.d.Budget.Holder()
	_, size := headerSize(r)
	// limits.overload_wait as a deadline, not a context: no context, timer
	// and cancel func on every request (the budget times its own wait).
	if err := h.AcquireBy(ctx, time.Now().Add(s.d.Config.Limits.OverloadWait), int64(size)); err != nil {
		return ctx, func() {}, overloaded(policy.Rejected)
	}
	return limit.WithHolder(ctx, h), h.Release, nil
}

// overloaded is the 503 of a request past the memory budget: Retry-After 1,
// outcome out (rejected before dispatch; retryable when the upstream was
// called but its answer could not be buffered).
func overloaded(out policy.Outcome) *problem.Error {
	return &problem.Error{Code: problem.Overloaded, Outcome: out, RetryAfter: 1,
		Detail: "the proxy holds as many request and response bytes in memory as its budget allows " +
			"(limits.max_inflight_bytes); retry in a second"}
}

// overloadedBy is the 503 overloaded of a reservation refused with err
// (limit.ErrShareExceeded or limit.ErrOverloaded), naming the share when
// it was the caller's organisation's share that was full (contract §10).
func (s *Server) overloadedBy(err error, out policy.Outcome) *problem.Error {
	pe := overloaded(out)
	if errors.Is(err, limit.ErrShareExceeded) {
		pe.Detail = "your organisation holds its share of the proxy's memory budget (limits.max_inflight_bytes_per_issuer: " +
			strconv.FormatInt(s.d.Budget.Share(), 10) + " bytes, in force while more than half of " +
			"limits.max_inflight_bytes is held); retry in a second"
	}
	return pe
}

// connectionShare is the 503 overloaded of a request cut to make room at
// limits.max_connections because its organisation held more than its share
// of the connections (limits.max_connections_per_issuer, contract §10),
// Retry-After 1: outcome rejected for one cut while its body arrived
// (nothing was stored or forwarded), retryable for a read cut at its
// upstream (a read is safe to send again).
func (s *Server) connectionShare(outcome policy.Outcome) *problem.Error {
	pe := overloaded(outcome)
	pe.Detail = "the proxy's connections are all in use and your organisation runs more requests than its share " +
		"of them (limits.max_connections_per_issuer: " + strconv.Itoa(s.d.Config.Limits.MaxConnectionsPerIssuer) +
		" of limits.max_connections, in force at the cap); this request was cut to make room; retry in a second"
	return pe
}

// readBody reads the request body within max_request_bytes (413
// body-too-large past it, contract §2), reserving it in the request's holder
// as it arrives (503 overloaded when the budget has no room within
// limits.overload_wait), and within limits.body_read_timeout (408
// request-timeout, connection closed), unless the listener cut it for its
// organisation's share of the connections (503 overloaded, connection
// closed).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	maxBytes := s.d.Config.Policy.MaxRequestBytes
	b, err := limit.ReadBodyBy(r.Context(), time.Now().Add(s.d.Config.Limits.OverloadWait),
		limit.HolderFrom(r.Context()), http.MaxBytesReader(w, r.Body, maxBytes),
		r.ContentLength, maxBytes)
	switch {
	case errors.Is(err, limit.ErrTooLarge) || isMaxBytes(err):
		return nil, problem.Errorf(problem.BodyTooLarge,
			"the request body is larger than max_request_bytes ("+strconv.FormatInt(maxBytes, 10)+" bytes)")
	case errors.Is(err, limit.ErrOverloaded):
		return nil, s.overloadedBy(err, policy.Rejected)
	case limit.IsTimeout(err) && limit.WasCut(r.Context()):
		w.Header().Set("Connection", "close")
		return nil, s.connectionShare(policy.Rejected)
	case limit.IsTimeout(err):
		w.Header().Set("Connection", "close")
		return nil, problem.Wrap(problem.RequestTimeout, "the request body did not arrive within "+
			s.d.Config.Limits.BodyReadTimeout.String()+" (limits.body_read_timeout)", err)
	case err != nil:
		return nil, problem.Wrap(problem.InvalidRequest, "the request body could not be read", err)
	}
	limit.BodyRead(r.Context()) // past its body: cut only when none of its organisation's requests still receives one
	return b, nil
}

// isMaxBytes reports whether err is http.MaxBytesReader's past its limit.
// The target of errors.As escapes, so it is made only for an error: not
// on every body read.
func isMaxBytes(err error) bool {
	if err == nil {
		return false
	}
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// bodyDeadline applies limits.body_read_timeout (limit.BodyDeadline) and
// limits.write_timeout (limit.WriteDeadline).
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return limit.BodyDeadline(s.d.Config.Limits.BodyReadTimeout, limit.WriteDeadline(s.d.Config.Limits.WriteTimeout, next))
}
