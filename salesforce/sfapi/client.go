// Package sfapi is the proxy's client of the Salesforce REST API, as the
// integration user: the OAuth 2.0 JWT bearer flow with one cached access
// token per process ("OAuth 2.0 JWT Bearer Flow for Server-to-Server
// Integration"), sObject Collections upserts and creates ("Upsert Records
// Using sObject Collections"), Composite calls of up to 25 subrequests
// ("Send Multiple Requests Using Composite"), SOQL queries with their pages
// ("Execute a SOQL Query"), invocable actions ("Invoking Actions", Actions
// Developer Guide), the Sforce-Limit-Info usage of every
// answer ("Limit Info Header"), and Salesforce's error answers turned into
// *Error with a Class ("Status Codes and Error Responses"), and the
// metadata of Pub/Sub API calls from the same token (PubSubAuth). It knows the
// REST shapes, not the proxy's objects: package salesforce decides what to
// write and reads it through its own API interface (docs/salesforce.md).
package sfapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/simpleforce/simpleforce"
)

// DefaultAPIVersion is the REST API version used when Options gives none
// (docs/salesforce.md).
const DefaultAPIVersion = "68.0"

// MaxCollection is the most records one sObject Collections call takes
// ("Upsert Records Using sObject Collections": up to 200).
const MaxCollection = 200

// maxAnswer bounds the bytes read of one answer (a query page of 2,000
// records with every field is far below it).
const maxAnswer = 32 << 20

// Options configure a Client.
type Options struct {
	// Credentials sign the JWT bearer assertion. Required.
	Credentials Credentials
	// APIVersion is the REST API version, "NN.0". Default "68.0".
	APIVersion string
	// Transport carries every request, token calls included. Default: a
	// transport with connect (10 s), TLS (10 s) and response-header (30 s)
	// timeouts and no environment proxy.
	Transport http.RoundTripper
	// RequestTimeout bounds each call. Default 30 s.
	RequestTimeout time.Duration
	// Now is the clock of JWT assertions. Default time.Now.
	Now func() time.Time
	// OnResult, when set, is told the result of every call: "ok" or a
	// Class (metrics: callout_salesforce_requests_total{result}).
	OnResult func(result string)
	// Logger receives the token failures (one line per streak). Default:
	// discard.
	Logger *slog.Logger
}

// Client calls the Salesforce REST API as the integration user, with one
// access token cached for every goroutine (the OAuth 2.0 JWT bearer flow).
//
// Requests go through github.com/simpleforce/simpleforce, wrapped as
// ARCHITECTURE.md "Salesforce facts" asks: a fresh simpleforce client per call (its clients have
// unsynchronised state, e.g. makeURL writes the API version), handed the
// token with SetSidLoc and an http.Client whose RoundTripper attaches the
// call's context (simpleforce has none), records the status, the
// Sforce-Limit-Info header and the body, and parses the bodies itself.
// simpleforce logs through the standard log package, and its httpRequest
// logs the whole body of every non-2xx answer: the RoundTripper therefore
// hands simpleforce only 2xx answers (an error answer becomes an empty 200
// "{}" after it is recorded, a network error too), so nothing simpleforce
// logs can carry a body; no path we use logs the token. Calls are guarded
// by recover (its ParseSalesforceError panics on a "[]" body).
//
// It is safe for concurrent use.
type Client struct {
	apiVersion string
	transport  http.RoundTripper
	timeout    time.Duration
	tokens     *tokens
	onResult   func(string)
	// used and limit are the last Sforce-Limit-Info api-usage=used/limit;
	// appRatio the float64 bits of the highest per-app-api-usage share.
	used, limit atomic.Int64
	appRatio    atomic.Uint64
}

// NewClient returns a Client. It does not contact Salesforce; the first
// call mints the token. Errors: missing credentials.
func NewClient(o Options) (*Client, error) {
	cr := o.Credentials
	if cr.LoginURL == "" || cr.ClientID == "" || cr.Username == "" || cr.Key == nil {
		return nil, errors.New("salesforce: login URL, client id, username and private key are required")
	}
	if o.APIVersion == "" {
		o.APIVersion = DefaultAPIVersion
	}
	if o.Transport == nil {
		o.Transport = defaultTransport()
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{apiVersion: strings.TrimPrefix(o.APIVersion, "v"), transport: o.Transport,
		timeout: o.RequestTimeout, onResult: o.OnResult}
	c.tokens = &tokens{creds: cr, now: o.Now, log: o.Logger.With(slog.String("component", "salesforce")),
		http: &http.Client{Transport: o.Transport, Timeout: o.RequestTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		onMint: func(err *Error) {
			if err != nil {
				c.result(string(err.Class))
			}
		}}
	return c, nil
}

// defaultTransport is an http.Transport with timeouts on every phase and
// no proxy from the environment.
func defaultTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
		ForceAttemptHTTP2:     true,
	}
}

// APIVersion is the REST API version in use, "NN.0".
func (c *Client) APIVersion() string { return c.apiVersion }

// Usage returns the last api-usage the org reported (Sforce-Limit-Info):
// calls used in the last 24 hours and the daily limit; 0, 0 before the
// first answer.
func (c *Client) Usage() (used, limit int64) { return c.used.Load(), c.limit.Load() }

// UsageRatio is the larger of the org's used/limit (Usage) and the
// connected app's per-app-api-usage share, as the last answer's
// Sforce-Limit-Info reported them; 0 when unknown. Either allocation
// running out stops the writes, so api_usage_slowdown compares with both.
func (c *Client) UsageRatio() float64 {
	used, limit := c.Usage()
	org := 0.0
	if limit > 0 {
		org = float64(used) / float64(limit)
	}
	return max(org, math.Float64frombits(c.appRatio.Load()))
}

func (c *Client) result(r string) {
	if c.onResult != nil {
		c.onResult(r)
	}
}

// dataPath is the path of a REST resource below /services/data/vNN.0/.
func (c *Client) dataPath(rest string) string {
	return "services/data/v" + c.apiVersion + "/" + rest
}

// request is one call through a simpleforce client (ApexREST or Query).
type request func(sf *simpleforce.Client)

// apex is a request through ApexREST: method on path (relative to the
// instance URL, e.g. dataPath(...)), body sent as JSON when not nil.
func apex(method, path string, body []byte) request {
	return func(sf *simpleforce.Client) {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		_, _ = sf.ApexREST(method, strings.TrimPrefix(path, "/"), r)
	}
}

// soql is a request through Query: a SOQL statement, or a nextRecordsUrl
// ("/services/data/vNN.0/query/01g…-2000").
func soql(q string) request {
	return func(sf *simpleforce.Client) { _, _ = sf.Query(q) }
}

// do makes one REST call with the cached token and returns the answer's
// body on 2xx. On INVALID_SESSION_ID it renews the token once (one
// goroutine mints; the others reuse its token) and retries once; a second
// INVALID_SESSION_ID is returned, never retried again. simpleforce's own
// results are ignored: the recorder has the answer. Errors: an *Error
// (ClassOf says what to do).
func (c *Client) do(ctx context.Context, op string, send request) ([]byte, error) {
	tok, terr := c.tokens.get(ctx)
	if terr != nil {
		return nil, terr
	}
	out, err := c.once(ctx, op, send, tok)
	if ClassOf(err) != InvalidSession {
		return out, err
	}
	if tok, terr = c.tokens.renew(ctx, tok); terr != nil {
		return nil, terr
	}
	return c.once(ctx, op, send, tok)
}

// once makes one request with tok through a fresh simpleforce client.
func (c *Client) once(ctx context.Context, op string, send request, tok Token) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rec := &recorder{ctx: ctx, base: c.transport}
	sf := simpleforce.NewClient(tok.InstanceURL, "callout-proxy", c.apiVersion)
	sf.SetHttpClient(&http.Client{Transport: rec, Timeout: c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
	sf.SetSidLoc(tok.AccessToken, tok.InstanceURL)
	if perr := guard(func() { send(sf) }); perr != nil {
		c.result(string(Retry))
		return nil, &Error{Op: op, Class: Retry, Err: perr}
	}
	c.noteLimit(rec.header)
	switch {
	case rec.err != nil:
		c.result(string(Retry))
		return nil, &Error{Op: op, Class: Retry, Err: RedactURLError(rec.err)}
	case !rec.sent:
		c.result(string(Retry))
		return nil, &Error{Op: op, Class: Retry, Err: errors.New("request not sent")}
	case rec.status < 200 || rec.status > 299:
		e := parseError(op, rec.status, rec.body)
		e.body = rec.body
		c.result(string(e.Class))
		return nil, e
	}
	c.result("ok")
	return rec.body, nil
}

// guard runs f, turning a panic into an error.
func guard(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("simpleforce panicked: %v", r)
		}
	}()
	f()
	return nil
}

// noteLimit records the Sforce-Limit-Info of an answer (every documented
// form, ParseLimitInfoHeader): the org's api-usage and the highest share
// of any per-app-api-usage quota.
func (c *Client) noteLimit(h http.Header) {
	info, ok := ParseLimitInfoHeader(h.Get("Sforce-Limit-Info"))
	if !ok {
		return
	}
	if info.APIUsage.Limit > 0 {
		c.used.Store(info.APIUsage.Used)
		c.limit.Store(info.APIUsage.Limit)
	}
	var app float64
	for _, a := range info.PerApp {
		app = max(app, a.Ratio())
	}
	c.appRatio.Store(math.Float64bits(app))
}

// recorder is the RoundTripper of one call: it attaches the call's
// context, records what came back, and hands simpleforce only 2xx answers
// (see Client).
type recorder struct {
	ctx    context.Context
	base   http.RoundTripper
	sent   bool
	status int
	header http.Header
	body   []byte
	err    error
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(r.ctx)
	req.Header.Set("Accept", "application/json")
	r.sent = true
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		r.err = err
		return synthetic(req, http.StatusOK, nil), nil
	}
	defer resp.Body.Close()
	r.status, r.header = resp.StatusCode, resp.Header
	r.body, r.err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if r.err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return synthetic(req, http.StatusOK, nil), nil
	}
	return synthetic(req, resp.StatusCode, r.body), nil
}

// synthetic is the answer simpleforce sees: status and body ("{}" when
// body is nil), nothing else.
func synthetic(req *http.Request, status int, body []byte) *http.Response {
	if body == nil {
		body = []byte("{}")
	}
	return &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}
