// Package forward is the upstream forwarder shared by the synchronous
// ingress and the asynchronous dispatcher: one call of Forwarder.Do is one
// attempt (contract §3, §4). It builds the upstream URL so that nothing in
// the caller's path can leave the endpoint's base path, forwards the
// caller's request minus hop-by-hop and caller-only headers plus the
// endpoint's credentials (static headers, an OAuth 2.0 token, a client
// certificate: package credentials), dials only through an SSRF guard
// (code.dny.dev/ssrf, with the endpoint's port and allowed_networks, cloud
// metadata addresses always refused), never follows redirects, enforces the
// connect, response-header and whole-attempt limits, and buffers the
// response up to max_response_bytes.
//
// It never logs bodies or header values. It is modelled on Go's
// net/http/httputil.ReverseProxy, but buffers: the outcome of an attempt is
// decided on the whole response (contract §4).
package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// Request is the caller's request as received, before the endpoint's
// credentials are injected. It is what a dead letter keeps and a replay
// sends again (contract §7).
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
	// URL, optional, is UpstreamURL(ep.BaseURL, Path, RawQuery) when the
	// caller built and checked it already (the ingress does, before it
	// reads the body); the attempt then takes it as it is, not parsing the
	// path a second time. nil: the attempt builds it. An attempt may set
	// its Host (an empty port removed, RFC 3986 §6.2.3); nothing else.
	URL *url.URL
	// CalloutID is the id of the callout this attempt belongs to; "" for a
	// read without a record. A standard_webhooks endpoint derives the
	// attempt's webhook-id from it (credentials.WebhookID).
	CalloutID string
	// Issuer is the organisation (the caller's JWT issuer) the callout
	// belongs to: when the attempt's context carries no holder (the
	// dispatcher's attempts), the response's bytes count toward its share
	// of the memory budget (Options.Budget), as the ingress's do. "": none.
	Issuer string
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
	// never contains the upstream URL (whose query may hold secrets) nor a
	// credential. Its forms, which the caller maps before or with
	// policy.Classify:
	//   - *problem.Error, nothing dispatched or a refused dial: code
	//     BlockedAddress (403; also matches ErrBlockedAddress; the token
	//     URL's dial too), PathEscape or InvalidRequest (400, from
	//     UpstreamURL or a bad method), Internal (500: a credential of the
	//     endpoint — header value, OAuth2 client id or secret, certificate,
	//     CA bundle, signing secret — was never loadable, see
	//     credentials.ConfigError);
	//   - an error matching policy.ErrCredentials (*credentials.Error): the
	//     OAuth 2.0 token, or the AWS credentials of aws_sigv4 from the
	//     standard chain, could not be obtained; nothing reached the
	//     upstream; Retryable "credentials";
	//   - *policy.TimeoutError with Limit "connect", "header" or "attempt";
	//   - an error wrapping policy.ErrResponseTooLarge (permanent);
	//   - an error wrapping policy.ErrOverloaded and limit.ErrOverloaded:
	//     the upstream answered but the memory budget (Options.Budget) had
	//     no room to buffer it; Retryable "overloaded", never the breaker's;
	//   - an error matching context.Canceled when ctx was canceled;
	//   - otherwise the transport's error (refused, reset, DNS, TLS, EOF),
	//     without net/http's *url.Error wrapper.
	Err error
	// Sent is true once the whole request was written to the upstream
	// (httptrace WroteRequest), even if no response followed: a write to an
	// endpoint with `idempotency: ignored` that was sent but not answered
	// is ambiguous and is not retried (contract §3). After a 401 re-send
	// (OAuth2 endpoints) it describes the re-sent request: the first one
	// was answered.
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
	// duration_ms; never bodies or header values) and the credentials'
	// events: a credential file rotated (info) or unusable (error), a
	// token request failed (warn) — never a value. Discarded if nil.
	Logger *slog.Logger
	// HeaderValues returns the static headers to inject for an endpoint,
	// values resolved. If nil, ep.Headers' SecretRefs are resolved on every
	// attempt (credentials.Set.Header): an environment variable through
	// Getenv, a file polled for changes at most every RecheckInterval
	// (one trailing newline trimmed; a bad new file keeps the old value).
	// The OAuth2 Authorization header is added either way.
	HeaderValues func(ep *config.Endpoint) (http.Header, error)
	// Getenv reads environment variables of credentials; os.Getenv if nil.
	Getenv func(string) string
	// RecheckInterval is the least time between two reads of one credential
	// file (secret, certificate, key, CA bundle), on Now's clock;
	// credentials.DefaultRecheckInterval (1 s) if zero.
	RecheckInterval time.Duration
	// MaxResponseBytes is the largest response body buffered, in bytes;
	// a larger one fails the attempt with policy.ErrResponseTooLarge
	// (contract §2, permanent). Default 12582912 (12 MiB).
	MaxResponseBytes int64
	// TLSClientConfig is the base TLS configuration, cloned per endpoint
	// and per token endpoint; an endpoint's tls.ca_file and oauth2.ca_file
	// replace its RootCAs, tls.client_cert_file adds a client certificate.
	// nil: system roots, TLS 1.2 at least.
	TLSClientConfig *tls.Config
	// MaxIdleConnsPerHost is the keep-alive pool size per endpoint;
	// default 256 (above the callers' connections of a busy replica).
	MaxIdleConnsPerHost int
	// Budget, optional, is the memory budget (limits.max_inflight_bytes)
	// response bodies are buffered in, as they arrive. The bytes go into
	// the holder of the attempt's context (limit.WithHolder: the ingress
	// holds them until its answer is written), or else into a holder of
	// Budget assigned to the Request's Issuer (its organisation's share,
	// limit.Holder.Assign) and released when Do returns. A response the
	// budget, or the organisation's share of it, has no room for within
	// its wait fails the attempt with an error wrapping both
	// policy.ErrOverloaded and limit.ErrOverloaded (and
	// limit.ErrShareExceeded when the share refused it): classified
	// Retryable "overloaded", no answer could be kept, and the breaker is
	// not told. nil: no budget.
	Budget *limit.Budget
	// Propagator, when tracing is on, writes the trace context of the
	// attempt's context (its attempt span: proxy/tracing StartAttempt) into
	// every request sent upstream, after removing the caller's own fields
	// of it (Fields: traceparent and tracestate for W3C Trace Context §3),
	// so the upstream sees one traceparent, the attempt's, on every attempt,
	// the dispatcher's included (the stored request keeps the caller's
	// header as received). nil (tracing off): the caller's fields pass as
	// any other.
	Propagator propagation.TextMapPropagator
}

// Forwarder makes attempts. It keeps, per endpoint name, one HTTP transport
// for the upstream (endpoints differ in port, networks, limits and TLS
// material), one for its token endpoint, and its credentials.Set; it is
// safe for concurrent use.
type Forwarder struct {
	now            func() time.Time
	logger         *slog.Logger
	headerValues   func(ep *config.Endpoint) (http.Header, error)
	getenv         func(string) string
	recheck        time.Duration
	maxResponse    int64
	tlsConfig      *tls.Config
	maxIdlePerHost int
	budget         *limit.Budget
	propagator     propagation.TextMapPropagator

	mu           sync.Mutex
	clients      map[string]*endpointClient  // by endpoint name
	tokenClients map[string]*endpointClient  // by endpoint name
	creds        map[string]*endpointSecrets // by endpoint name
}

// New returns a Forwarder with opts' defaults filled in.
func New(opts Options) *Forwarder {
	f := &Forwarder{
		now: opts.Now, logger: opts.Logger, headerValues: opts.HeaderValues, getenv: opts.Getenv,
		recheck: opts.RecheckInterval, maxResponse: opts.MaxResponseBytes, tlsConfig: opts.TLSClientConfig,
		maxIdlePerHost: opts.MaxIdleConnsPerHost, budget: opts.Budget, propagator: opts.Propagator,
		clients:      map[string]*endpointClient{},
		tokenClients: map[string]*endpointClient{}, creds: map[string]*endpointSecrets{},
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.logger == nil {
		f.logger = slog.New(slog.DiscardHandler)
	}
	if f.getenv == nil {
		f.getenv = os.Getenv
	}
	if f.maxResponse <= 0 {
		f.maxResponse = policy.Defaults().MaxResponseBytes
	}
	if f.maxIdlePerHost <= 0 {
		f.maxIdlePerHost = defaultMaxIdleConnsPerHost
	}
	return f
}

// Do makes one attempt of req against ep (contract §3, §4) and returns its
// result; it never panics on a bad request, it reports it in Attempt.Err.
// The attempt is bounded by ep's attempt limit (AttemptTimeout; the policy
// default if zero) around the OAuth2 token request (when one is needed),
// the request and the body read — and, when an OAuth2 endpoint answers
// 401, one token refresh and one immediate re-send (RFC 6750 §3.1), whose
// result is the attempt's. It ends early if ctx is canceled. ep must be a
// loaded endpoint (BaseURL set).
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

// attempt is Do without the clock and the log. The token request, the
// request and, on an OAuth2 endpoint's 401, one token refresh and one
// immediate re-send all run within the one attempt limit: a lease never
// expires under them (contract §3), and the re-send is no retry of the
// callout's schedule. The Attempt is the last response's.
func (f *Forwarder) attempt(ctx context.Context, ep *config.Endpoint, req *Request) Attempt {
	u := req.URL
	if u == nil {
		var err error
		if u, err = UpstreamURL(ep.BaseURL, req.Path, req.RawQuery); err != nil {
			return Attempt{Err: err}
		}
	}
	creds := f.credentials(ep)
	static, err := f.staticHeaders(ep, creds)
	if err != nil {
		return Attempt{Err: problem.Wrap(problem.Internal,
			"the configured headers of endpoint "+ep.Name+" could not be resolved", err)}
	}
	hreq, err := newRequest(u, req, static)
	if err != nil {
		return Attempt{Err: err}
	}
	f.traceContext(ctx, hreq.Header)
	c, err := f.client(ep, creds)
	if err != nil {
		return Attempt{Err: problem.Wrap(problem.Internal,
			"the transport of endpoint "+ep.Name+" could not be built (its TLS files?)", err)}
	}
	actx, cancel := context.WithTimeout(ctx, limitsOf(ep).attempt)
	defer cancel()
	tok, err := creds.Token(actx)
	if err != nil {
		return Attempt{Err: tokenFailure(ctx, ep, err)}
	}
	if tok != nil {
		tok.SetHeader(hreq.Header)
	}
	if err := creds.Sign(actx, hreq, req.Body, req.CalloutID); err != nil {
		return Attempt{Err: signFailure(ctx, ep, err)}
	}
	a := f.send(ctx, actx, c, req, hreq)
	if tok == nil || a.Response == nil || a.Response.Status != http.StatusUnauthorized {
		return a
	}
	// RFC 6750 §3.1: the token was refused (revoked, rotated, expired
	// early). One refresh, one re-send; a second 401 is the answer.
	creds.Unauthorized(tok)
	if tok, err = creds.Token(actx); err != nil {
		return Attempt{Err: tokenFailure(ctx, ep, err)}
	}
	hreq, _ = newRequest(u, req, static) // it built once already
	f.traceContext(ctx, hreq.Header)
	tok.SetHeader(hreq.Header)
	if err := creds.Sign(actx, hreq, req.Body, req.CalloutID); err != nil {
		return Attempt{Err: signFailure(ctx, ep, err)}
	}
	return f.send(ctx, actx, c, req, hreq)
}

// traceContext replaces the caller's trace context fields in h (an
// outbound header: canonical names) with ctx's, when tracing is on.
func (f *Forwarder) traceContext(ctx context.Context, h http.Header) {
	if f.propagator == nil {
		return
	}
	for _, k := range f.propagator.Fields() {
		delete(h, http.CanonicalHeaderKey(k))
	}
	f.propagator.Inject(ctx, tracing.HeaderCarrier(h))
}

// send makes one HTTP exchange of req's attempt, hreq, under actx (the
// attempt limit; parent is the caller's context) and buffers the response
// in parent's holder, or else in one of req.Issuer's.
func (f *Forwarder) send(parent, actx context.Context, c *http.Client, req *Request, hreq *http.Request) Attempt {
	method := req.Method
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			sent.Store(true)
		}
	}}
	resp, err := c.Do(hreq.WithContext(httptrace.WithClientTrace(actx, trace)))
	if err != nil {
		return Attempt{Err: transportError(parent, actx, err), Sent: sent.Load()}
	}
	defer resp.Body.Close()
	h := limit.HolderFrom(parent)
	if h == nil {
		h = f.budget.Holder()
		h.Assign(req.Issuer) // the dispatcher's attempt: its callout's organisation's share
		defer h.Release()
	}
	body, err := limit.ReadBody(actx, h, resp.Body, bodyLength(method, resp), f.maxResponse)
	switch {
	case errors.Is(err, limit.ErrTooLarge):
		return Attempt{Sent: true, Err: fmt.Errorf("%w: more than %d bytes",
			policy.ErrResponseTooLarge, f.maxResponse)}
	case errors.Is(err, limit.ErrOverloaded):
		// The proxy's own limit, not the upstream's failure (policy).
		return Attempt{Sent: true, Err: fmt.Errorf("the upstream's response was not buffered (%w): %w",
			policy.ErrOverloaded, err)}
	case err != nil:
		return Attempt{Err: transportError(parent, actx, err), Sent: true}
	}
	return Attempt{Sent: true, Response: &Response{
		Status: resp.StatusCode,
		Header: responseHeader(method, resp, len(body)),
		Body:   body,
	}}
}

// newRequest builds the outbound request: the checked upstream URL u, the
// outbound header with the endpoint's injected fields, and the body with an
// exact Content-Length. The caller's User-Agent is kept, and when the
// caller sent none, none is sent (Go would add its own otherwise). A bad
// method is a *problem.Error of code InvalidRequest.
//
// A write is never re-sent by the transport on its own: net/http replays a
// request that has a rewindable body, or an empty one with an
// Idempotency-Key, when a reused keep-alive connection dies after the
// request was written — which would hide an attempt and break contract §3's
// "ambiguous" rule. So a write with a body gets an opaque reader without
// GetBody and its exact Content-Length; an empty write keeps no body, and its
// Idempotency-Key travels under the lower-case field name, which net/http's
// replay rule does not look up (field names are case-insensitive, RFC 9110
// §5.1: the upstream sees the same field and value). The transport may then
// retry only what it never wrote.
func newRequest(u *url.URL, req *Request, injected http.Header) (*http.Request, error) {
	if !validMethod(req.Method) {
		return nil, problem.Wrap(problem.InvalidRequest, "the request cannot be forwarded",
			errors.New("invalid method "+strconv.Quote(req.Method)))
	}
	// Built as http.NewRequestWithContext would, but from the checked URL
	// itself: not printed with u.String() and parsed back, and without the
	// empty header NewRequest makes. The context is set once, by send.
	u.Host = removeEmptyPort(u.Host)
	hreq := &http.Request{Method: req.Method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Host: u.Host, Header: OutboundHeader(req.Header, injected)}
	write := req.Method != http.MethodGet && req.Method != http.MethodHead && req.Method != http.MethodOptions
	if body := req.Body; len(body) > 0 {
		hreq.Body = io.NopCloser(bytes.NewReader(body))
		hreq.ContentLength = int64(len(body))
		if !write { // a read may be sent again by the transport: NewRequest's GetBody
			hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	if _, ok := hreq.Header["User-Agent"]; !ok {
		hreq.Header["User-Agent"] = nil // present but empty: Go sends no User-Agent
	}
	if write && len(req.Body) == 0 {
		for _, k := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
			if v, ok := hreq.Header[k]; ok {
				delete(hreq.Header, k)
				hreq.Header[strings.ToLower(k)] = v
			}
		}
	}
	return hreq, nil
}

// validMethod reports whether method is an RFC 9110 §9.1 method: a token
// (§5.6.2), as http.NewRequest requires.
func validMethod(method string) bool {
	if method == "" {
		return false
	}
	for i := 0; i < len(method); i++ {
		c := method[i]
		if c >= 0x80 || !tokenChar[c] {
			return false
		}
	}
	return true
}

// tokenChar marks the bytes of an RFC 9110 §5.6.2 token: tchar.
var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// removeEmptyPort strips the empty port of "host:" or "[::1]:" (RFC 3986
// §6.2.3), as http.NewRequest does (a host ending in ":" has an empty port:
// an IPv6 literal is bracketed).
func removeEmptyPort(host string) string { return strings.TrimSuffix(host, ":") }

// bodyLength is the length of resp's body as ReadBody takes it: its
// Content-Length when net/http knows it (−1 when chunked or unknown), 0 for
// a HEAD request.
func bodyLength(method string, resp *http.Response) int64 {
	if method == http.MethodHead {
		return 0
	}
	return resp.ContentLength
}

// responseHeader is the caller's copy of an upstream response header:
// hop-by-hop fields removed and Content-Length equal to the buffered body
// when the response can carry one.
func responseHeader(method string, resp *http.Response, bodyLen int) http.Header {
	h, vals := inboundHeader(resp.Header, 1)
	bodyless := method == http.MethodHead || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	if !bodyless { // h.Set's canonical name, its value in the values' array
		vals = append(vals, strconv.Itoa(bodyLen))
		h["Content-Length"] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	return h
}

// CloseIdleConnections closes the idle keep-alive connections of every
// endpoint's and token endpoint's transport, e.g. on shutdown or after a
// configuration reload.
func (f *Forwarder) CloseIdleConnections() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.clients {
		c.tr.CloseIdleConnections()
	}
	for _, c := range f.tokenClients {
		c.tr.CloseIdleConnections()
	}
}

// Classify is the classification step of one attempt (policy.Classify of
// its status and error, contract §2): the outcome class and its reason word.
func (a Attempt) Classify() policy.Classification {
	status := 0
	if a.Response != nil {
		status = a.Response.Status
	}
	return policy.Classify(status, a.Err)
}

// Result is the attempt as policy.Decide reads it.
func (a Attempt) Result() policy.AttemptResult {
	r := policy.AttemptResult{Sent: a.Sent, Started: a.Started, Duration: a.Duration}
	if a.Response != nil {
		r.Response = &policy.Response{Status: a.Response.Status, Header: a.Response.Header, Body: a.Response.Body}
	}
	return r
}
