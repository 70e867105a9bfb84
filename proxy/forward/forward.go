// Package forward is the upstream forwarder shared by the synchronous
// ingress and the asynchronous dispatcher: one call of Forwarder.Do is one
// attempt (SPEC.md §3, §4). It builds the upstream URL so that nothing in
// the caller's path can leave the endpoint's base path, forwards the
// caller's request minus hop-by-hop and caller-only headers plus the
// endpoint's injected headers, dials only through an SSRF guard
// (code.dny.dev/ssrf, with the endpoint's port and allowed_networks, cloud
// metadata addresses always refused), never follows redirects, enforces the
// connect, response-header and whole-attempt limits, and buffers the
// response up to max_response_bytes.
//
// It never logs bodies or header values. It is modelled on Go's
// net/http/httputil.ReverseProxy, but buffers: the outcome of an attempt is
// decided on the whole response (SPEC.md §4).
package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// Request is the caller's request as received, before the endpoint's
// credentials are injected. It is what a dead letter keeps and a replay
// sends again (SPEC.md §7).
type Request struct {
	// Method is the HTTP method, e.g. "POST".
	Method string
	// Path is the caller's path below /callout/{endpoint}, still escaped
	// as on the wire (the suffix of r.URL.EscapedPath()): "" or "/...".
	Path string
	// RawQuery is the caller's query without "?", as on the wire.
	RawQuery string
	// Header is the caller's header as received, Authorization included;
	// OutboundHeader decides what reaches the upstream.
	Header http.Header
	// Body is the whole request body; nil or empty sends none.
	Body []byte
}

// Response is an upstream response, buffered.
type Response struct {
	// Status is the HTTP status code, e.g. 200.
	Status int
	// Header is the upstream's header without hop-by-hop fields. For a
	// response that can have a body, Content-Length is len(Body); for a
	// HEAD request and 1xx, 204 and 304 responses it is left as the
	// upstream sent it (RFC 9110 §8.6).
	Header http.Header
	// Body is the whole body, at most max_response_bytes, exactly as sent
	// (a gzip body stays gzip, with its Content-Encoding).
	Body []byte
}

// Attempt is the result of one attempt.
type Attempt struct {
	// Response is the upstream's response; nil when there was none.
	Response *Response
	// Err is why there is no Response; nil when Response is set. Its text
	// never contains the upstream URL (whose query may hold secrets). Its
	// forms, which the caller maps before or with policy.Classify:
	//   - *problem.Error, nothing dispatched or a refused dial: code
	//     BlockedAddress (403; also matches ErrBlockedAddress), PathEscape
	//     or InvalidRequest (400, from UpstreamURL or a bad method),
	//     Internal (500: the endpoint's headers could not be resolved);
	//   - *policy.TimeoutError with Limit "connect", "header" or "attempt";
	//   - an error wrapping policy.ErrResponseTooLarge (permanent);
	//   - an error matching context.Canceled when ctx was canceled;
	//   - otherwise the transport's error (refused, reset, DNS, TLS, EOF),
	//     without net/http's *url.Error wrapper.
	Err error
	// Sent is true once the whole request was written to the upstream
	// (httptrace WroteRequest), even if no response followed: a write to an
	// endpoint with `idempotency: ignored` that was sent but not answered
	// is ambiguous and is not retried (SPEC.md §3).
	Sent bool
	// Started is when the attempt began, from Options.Now.
	Started time.Time
	// Duration is how long the attempt took, body read included.
	Duration time.Duration
}

// Options configure a Forwarder. The zero value works.
type Options struct {
	// Now is the clock for Attempt.Started and Duration; time.Now if nil.
	Now func() time.Time
	// Logger receives one debug record per attempt (endpoint, status,
	// duration_ms; never bodies or header values). Discarded if nil.
	Logger *slog.Logger
	// HeaderValues returns the headers to inject for an endpoint, values
	// resolved. If nil, ep.Headers' SecretRefs are resolved on every
	// attempt through Getenv (env) or by reading the file (one trailing
	// newline trimmed); an unset or empty secret fails the attempt.
	HeaderValues func(ep *config.Endpoint) (http.Header, error)
	// Getenv reads environment variables for the default HeaderValues;
	// os.Getenv if nil.
	Getenv func(string) string
	// MaxResponseBytes is the largest response body buffered, in bytes;
	// a larger one fails the attempt with policy.ErrResponseTooLarge
	// (SPEC.md §2, permanent). Default 12582912 (12 MiB).
	MaxResponseBytes int64
	// TLSClientConfig is the base TLS configuration, cloned per endpoint,
	// e.g. to trust a private CA; nil: system roots, TLS 1.2 at least.
	TLSClientConfig *tls.Config
	// MaxIdleConnsPerHost is the keep-alive pool size per endpoint;
	// default 32.
	MaxIdleConnsPerHost int
}

// Forwarder makes attempts. It keeps one HTTP transport per endpoint name
// (endpoints differ in port, networks and limits) and is safe for
// concurrent use.
type Forwarder struct {
	now            func() time.Time
	logger         *slog.Logger
	headerValues   func(ep *config.Endpoint) (http.Header, error)
	maxResponse    int64
	tlsConfig      *tls.Config
	maxIdlePerHost int

	mu      sync.Mutex
	clients map[string]*endpointClient // by endpoint name
}

// New returns a Forwarder with opts' defaults filled in.
func New(opts Options) *Forwarder {
	f := &Forwarder{
		now: opts.Now, logger: opts.Logger, headerValues: opts.HeaderValues,
		maxResponse: opts.MaxResponseBytes, tlsConfig: opts.TLSClientConfig,
		maxIdlePerHost: opts.MaxIdleConnsPerHost, clients: map[string]*endpointClient{},
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.logger == nil {
		f.logger = slog.New(slog.DiscardHandler)
	}
	if f.headerValues == nil {
		getenv := opts.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		f.headerValues = func(ep *config.Endpoint) (http.Header, error) {
			return resolveHeaders(ep.Headers, getenv)
		}
	}
	if f.maxResponse <= 0 {
		f.maxResponse = policy.Defaults().MaxResponseBytes
	}
	if f.maxIdlePerHost <= 0 {
		f.maxIdlePerHost = defaultMaxIdleConnsPerHost
	}
	return f
}

// Do makes one attempt of req against ep (SPEC.md §3, §4) and returns its
// result; it never panics on a bad request, it reports it in Attempt.Err.
// The attempt is bounded by ep's attempt limit (AttemptTimeout; the policy
// default if zero) around the request and the body read, and ends early if
// ctx is canceled. ep must be a loaded endpoint (BaseURL set).
func (f *Forwarder) Do(ctx context.Context, ep *config.Endpoint, req *Request) Attempt {
	started := f.now()
	a := f.attempt(ctx, ep, req)
	a.Started = started
	a.Duration = f.now().Sub(started)
	status := 0
	if a.Response != nil {
		status = a.Response.Status
	}
	f.logger.LogAttrs(ctx, slog.LevelDebug, "upstream attempt",
		slog.String("endpoint", ep.Name), slog.Int("status", status),
		slog.Int64("duration_ms", a.Duration.Milliseconds()))
	return a
}

// attempt is Do without the clock and the log.
func (f *Forwarder) attempt(ctx context.Context, ep *config.Endpoint, req *Request) Attempt {
	hreq, err := f.newRequest(ctx, ep, req)
	if err != nil {
		return Attempt{Err: err}
	}
	c, err := f.client(ep)
	if err != nil {
		return Attempt{Err: problem.Wrap(problem.Internal, "the endpoint's transport could not be built", err)}
	}
	actx, cancel := context.WithTimeout(ctx, limitsOf(ep).attempt)
	defer cancel()
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			sent.Store(true)
		}
	}}
	resp, err := c.Do(hreq.WithContext(httptrace.WithClientTrace(actx, trace)))
	if err != nil {
		return Attempt{Err: transportError(ctx, actx, err), Sent: sent.Load()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxResponse+1))
	switch {
	case err != nil:
		return Attempt{Err: transportError(ctx, actx, err), Sent: true}
	case int64(len(body)) > f.maxResponse:
		return Attempt{Sent: true, Err: fmt.Errorf("%w: more than %d bytes",
			policy.ErrResponseTooLarge, f.maxResponse)}
	}
	return Attempt{Sent: true, Response: &Response{
		Status: resp.StatusCode,
		Header: responseHeader(req.Method, resp, len(body)),
		Body:   body,
	}}
}

// newRequest builds the outbound request: the checked upstream URL, the
// outbound header with the endpoint's injected fields, and the body with an
// exact Content-Length. The caller's User-Agent is kept, and when the
// caller sent none, none is sent (Go would add its own otherwise).
func (f *Forwarder) newRequest(ctx context.Context, ep *config.Endpoint, req *Request) (*http.Request, error) {
	u, err := UpstreamURL(ep.BaseURL, req.Path, req.RawQuery)
	if err != nil {
		return nil, err
	}
	injected, err := f.headerValues(ep)
	if err != nil {
		return nil, problem.Wrap(problem.Internal,
			"the configured headers of endpoint "+ep.Name+" could not be resolved", err)
	}
	var body io.Reader
	if len(req.Body) > 0 {
		body = bytes.NewReader(req.Body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, u.String(), body)
	if err != nil {
		return nil, problem.Wrap(problem.InvalidRequest, "the request cannot be forwarded", err)
	}
	hreq.URL = u // keep RawPath exactly; String/Parse could re-escape
	hreq.Header = OutboundHeader(req.Header, injected)
	if _, ok := hreq.Header["User-Agent"]; !ok {
		hreq.Header["User-Agent"] = nil // present but empty: Go sends no User-Agent
	}
	return hreq, nil
}

// responseHeader is the caller's copy of an upstream response header:
// hop-by-hop fields removed and Content-Length equal to the buffered body
// when the response can carry one.
func responseHeader(method string, resp *http.Response, bodyLen int) http.Header {
	h := inboundHeader(resp.Header)
	bodyless := method == http.MethodHead || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	if !bodyless {
		h.Set("Content-Length", strconv.Itoa(bodyLen))
	}
	return h
}

// CloseIdleConnections closes the idle keep-alive connections of every
// endpoint's transport, e.g. on shutdown or after a configuration reload.
func (f *Forwarder) CloseIdleConnections() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.clients {
		c.tr.CloseIdleConnections()
	}
}
