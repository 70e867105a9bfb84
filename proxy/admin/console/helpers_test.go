package console_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/admin"
	"github.com/calloutproxy/callout-proxy/proxy/admin/console"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/inspect"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/pending"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/stats"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// The admin tokens of every test: ops (write) and viewer (read).
const (
	writeToken = "write-token-0123456789abcdef"
	readToken  = "read-token-0123456789abcdef0"
	issuer     = "https://org.my.salesforce.com"
)

// t0 is a round Unix-ms instant.
var t0 = time.UnixMilli(1_700_000_000_000)

// env is the real admin API (proxy/admin over the real store and replay
// service on one Redis backend) with the console mounted, served by an
// httptest server.
type env struct {
	clk   *clocktest.Clock
	store *redisstore.Store
	svc   *replay.Service
	cfg   *config.Config
	logs  *proctest.LogBuffer
	srv   *httptest.Server
	// stats is the per-endpoint counts the charts read (one replica's).
	stats *stats.Recorder
	// deps built the handler srv serves (h); reload builds another on them.
	deps admin.Deps
	h    atomic.Pointer[http.Handler]
}

// reload serves a new admin handler, as a configuration reload does
// (proxy/app): e's dependencies and console sessions, the admin tokens
// of tokens (their values from the environment W and R).
func (e *env) reload(t *testing.T, tokens ...config.AdminToken) {
	t.Helper()
	cfg := *e.cfg
	cfg.Admin.Tokens = tokens
	at, err := auth.NewAdminTokens(cfg.Admin, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	e.deps.Config, e.deps.Tokens = &cfg, at
	h := admin.New(e.deps)
	e.h.Store(&h)
}

// testEnv is the environment of the admin tokens' values.
func testEnv(k string) string { return map[string]string{"W": writeToken, "R": readToken}[k] }

// testConfig has pay-api and crm-api with the default policy, breaker
// threshold 3.
func testConfig() *config.Config {
	p := policy.Defaults()
	p.BreakerFailures = 3
	ep := func(name string) *config.Endpoint {
		return &config.Endpoint{Name: name, AttemptTimeout: p.AttemptTimeout,
			BreakerFailures: p.BreakerFailures, BreakerProbeInterval: p.BreakerProbeInterval}
	}
	pay, crm := ep("pay-api"), ep("crm-api")
	pay.Breaker.Partition = config.BreakerPartitionEndpoint // one breaker; crm-api's is per organisation
	crm.Breaker.Partition = config.BreakerPartitionOrganisation
	return &config.Config{Policy: p, Auth: config.Auth{Issuers: []string{issuer}},
		Admin: config.Admin{Tokens: []config.AdminToken{
			{Name: "ops", TokenEnv: "W", Scope: "write"}, {Name: "viewer", TokenEnv: "R", Scope: "read"},
		}},
		Endpoints: map[string]*config.Endpoint{"pay-api": pay, "crm-api": crm}}
}

// forEachBackend runs fn on every Redis backend redistest offers.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for i, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, newEnv(t, b, uint64(i+1))) })
	}
}

// newEnv builds the admin listener's handler over backend b.
func newEnv(t *testing.T, b redistest.Backend, seed uint64) *env {
	t.Helper()
	e := &env{clk: clocktest.New(t0), cfg: testConfig(), logs: &proctest.LogBuffer{}}
	e.logs.CheckAuditResults(t)
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	e.store = redisstore.New(b.Client, redisstore.Options{PinScriptTime: true, Now: e.clk.Now, Rand: rand.NewChaCha8(s),
		DeadLetterRetention: 30 * 24 * time.Hour,
		Partitioned:         func(ep string) bool { return e.cfg.Endpoints[ep].PartitionedByOrganisation() }})
	binary.LittleEndian.PutUint64(s[:], seed+1<<32)
	js := jobs.New(b.Client, jobs.Options{PinScriptTime: true, Now: e.clk.Now, Rand: rand.NewChaCha8(s)})
	logger := slog.New(slog.NewJSONHandler(e.logs, nil))
	e.svc = replay.New(replay.Options{Config: e.cfg, Store: e.store, DeadLetters: deadletters.New(b.Client, e.store, deadletters.Options{Now: e.clk.Now, PinScriptTime: true}), Jobs: js, Owner: "replica-1",
		Logger: logger, Now: e.clk.Now, Sleep: e.clk.Sleep})
	tokens, err := auth.NewAdminTokens(e.cfg.Admin, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e.stats = stats.New(b.Client, stats.Options{Now: e.clk.Now})
	e.deps = admin.Deps{Config: e.cfg, Tokens: tokens, Endpoints: e.store, DeadLetters: e.svc,
		ReplayJobs: e.svc, Keys: inspect.New(b.Client, e.store), Callouts: pending.New(b.Client, e.store), Metrics: m, Logger: logger, Now: e.clk.Now,
		Stats: e.stats, ConsoleSessions: console.NewSessions(0, 0)}
	h := admin.New(e.deps)
	e.h.Store(&h)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*e.h.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t *testing.T
	e *env
	c *http.Client
}

func (e *env) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, e: e, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is one answer: status, headers, body.
type page struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return page{Status: res.StatusCode, Header: res.Header, Body: string(body)}
}

// get reads a console path.
func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.e.srv.URL+path, nil)
	return b.do(req)
}

// post posts a form to a console path, as a same-origin browser form.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.e.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

var (
	nonceRe = regexp.MustCompile(`name="nonce" value="([^"]+)"`)
	csrfRe  = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// postLogin reads the login form and posts it back with its nonce, token
// and the other fields of form (nil: none), and returns the answer.
func (b *browser) postLogin(token string, form url.Values) page {
	b.t.Helper()
	p := b.get("/console/login")
	m := nonceRe.FindStringSubmatch(p.Body)
	if m == nil {
		b.t.Fatalf("login form without nonce: %d %s", p.Status, p.Body)
	}
	if form == nil {
		form = url.Values{}
	}
	form.Set("token", token)
	form.Set("nonce", m[1])
	return b.post("/console/login", form)
}

// login logs in with token and returns the session's CSRF token.
func (b *browser) login(token string) string {
	b.t.Helper()
	p := b.postLogin(token, nil)
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/endpoints" {
		b.t.Fatalf("login: %d %s, want 303 to /console/endpoints", p.Status, p.Header.Get("Location"))
	}
	return b.csrf()
}

// csrf reads the session's CSRF token off the endpoints page.
func (b *browser) csrf() string {
	b.t.Helper()
	p := b.get("/console/endpoints")
	m := csrfRe.FindStringSubmatch(p.Body)
	if m == nil {
		b.t.Fatalf("no csrf field: %d %s", p.Status, p.Body)
	}
	return m[1]
}

// wantStatus fails unless p has status.
func (p page) wantStatus(t *testing.T, status int) page {
	t.Helper()
	if p.Status != status {
		t.Fatalf("status %d, want %d; body:\n%s", p.Status, status, p.Body)
	}
	return p
}

// wantBody fails unless p's body contains every part.
func (p page) wantBody(t *testing.T, parts ...string) page {
	t.Helper()
	for _, s := range parts {
		if !strings.Contains(p.Body, s) {
			t.Fatalf("body lacks %q:\n%s", s, p.Body)
		}
	}
	return p
}

// wantNoBody fails when p's body contains any part.
func (p page) wantNoBody(t *testing.T, parts ...string) page {
	t.Helper()
	for _, s := range parts {
		if strings.Contains(p.Body, s) {
			t.Fatalf("body holds %q:\n%s", s, p.Body)
		}
	}
	return p
}

// newCallout is a keyed POST callout of endpoint with body.
func newCallout(endpoint, key, contentType string, body []byte) policy.NewCallout {
	return policy.NewCallout{Endpoint: endpoint, Issuer: issuer, Method: http.MethodPost, Path: "/v1/items",
		Header: http.Header{"Content-Type": {contentType}, "Authorization": {"Bearer caller-secret"}},
		Body:   body, IdempotencyKey: key, SourceRecord: "001000000000001AAA"}
}

// deadLetter makes a dead letter of endpoint: enqueued, claimed, and
// completed with a permanent 422 whose body is respBody.
func (e *env) deadLetter(t *testing.T, nc policy.NewCallout, respBody string) string {
	t.Helper()
	if _, err := e.store.Enqueue(ctxT(t), nc, policy.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	return e.completeNext(t, nc.Endpoint, policy.Completion{Action: policy.ActionDeadLetter,
		Reason: policy.DeadLetterPermanent, Error: "status_4xx",
		Attempt:  &policy.Attempt{StartedAt: e.clk.Now(), Status: 422, Outcome: policy.Permanent},
		Response: &policy.Response{Status: 422, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte(respBody)}})
}

// failures makes n retryable failures of endpoint that count toward its
// breaker; the callouts stay scheduled.
func (e *env) failures(t *testing.T, endpoint string, n int) {
	t.Helper()
	ep := e.cfg.Endpoints[endpoint]
	for i := range n {
		nc := newCallout(endpoint, "fail-"+endpoint+"-"+string(rune('a'+i)), "application/json", []byte(`{}`))
		if _, err := e.store.Enqueue(ctxT(t), nc, policy.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
		e.completeNext(t, endpoint, policy.Completion{Action: policy.ActionRetry,
			Attempt:             &policy.Attempt{StartedAt: e.clk.Now(), Status: 503, Outcome: policy.Retryable},
			Response:            &policy.Response{Status: 503},
			CountsTowardBreaker: true, NextAttemptAt: e.clk.Now().Add(time.Minute),
			Breaker: policy.BreakerSettings{Failures: ep.BreakerFailures, ProbeInterval: ep.BreakerProbeInterval}})
	}
}

// exhaust claims endpoint's next callout and dead-letters it as exhausted
// after a 503 (a retryable last attempt), returning its id.
func (e *env) exhaust(t *testing.T, endpoint string) string {
	t.Helper()
	return e.completeNext(t, endpoint, policy.Completion{Action: policy.ActionDeadLetter,
		Reason: policy.DeadLetterExhausted, Error: "status_5xx",
		Attempt:  &policy.Attempt{StartedAt: e.clk.Now(), Status: 503, Outcome: policy.Retryable},
		Response: &policy.Response{Status: 503}})
}

// completeNext claims endpoint's next due callout, which must be there,
// completes it with comp and returns its id.
func (e *env) completeNext(t *testing.T, endpoint string, comp policy.Completion) string {
	t.Helper()
	ctx := ctxT(t)
	cr, err := e.store.Claim(ctx, endpoint, redisstore.ClaimOptions{Batch: 1, Lease: 30 * time.Second})
	if err != nil || len(cr.Claimed) != 1 {
		t.Fatalf("claim of %s: %+v, %v", endpoint, cr, err)
	}
	if _, err := e.store.Complete(ctx, cr.Claimed[0], comp); err != nil {
		t.Fatal(err)
	}
	return cr.Claimed[0].ID
}
