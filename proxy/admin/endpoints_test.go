package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

var _ EndpointStore = (*redisstore.Store)(nil)

// admT0 is the admin tests' clock start, a round Unix-ms instant.
var admT0 = time.UnixMilli(1_700_000_000_000)

const (
	admWriteToken = "write-token-0123456789"
	admReadToken  = "read-token-0123456789"
)

// admEnv is an admin listener over a store on one backend, with its logs,
// metrics and the dead letters handed to Events.
type admEnv struct {
	h       http.Handler
	store   *redisstore.Store
	now     time.Time
	logs    *proctest.LogBuffer
	metrics *metrics.Metrics
	events  *admEvents
	sources atomic.Int32 // the requests' addresses
}

// admEvents records what the admin API hands to Events.
type admEvents struct {
	mu  sync.Mutex
	got []policy.Finished
}

func (e *admEvents) Finished(_ context.Context, f policy.Finished) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, f)
}

// admConfig has two endpoints: pay-api (threshold 2, probe every minute)
// and crm-api (the defaults).
func admConfig() *config.Config {
	p := policy.Defaults()
	return &config.Config{Policy: p, Endpoints: map[string]*config.Endpoint{
		"pay-api": {Name: "pay-api", BreakerFailures: 2, BreakerProbeInterval: time.Minute,
			AttemptTimeout: p.AttemptTimeout},
		"crm-api": {Name: "crm-api", BreakerFailures: p.BreakerFailures,
			BreakerProbeInterval: p.BreakerProbeInterval, AttemptTimeout: p.AttemptTimeout},
	}}
}

// newAdmEnv builds the admin handler over store (nil: a real store on b)
// with the tokens ops (write) and viewer (read).
func newAdmEnv(t *testing.T, b redistest.Backend, store EndpointStore) *admEnv {
	t.Helper()
	e := &admEnv{now: admT0, logs: &proctest.LogBuffer{}, events: &admEvents{}}
	e.logs.CheckAuditResults(t)
	clock := func() time.Time { return e.now }
	if b.Client != nil {
		e.store = redisstore.New(b.Client, redisstore.Options{PinScriptTime: true, Now: clock})
	}
	if store == nil {
		store = e.store
	}
	tokens := testTokens(t, admWriteToken, admReadToken)
	var err error
	if e.metrics, err = metrics.New(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	e.h = New(Deps{Config: admConfig(), Tokens: tokens, Endpoints: store, Metrics: e.metrics,
		Events: e.events, Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), Now: clock})
	return e
}

// do sends one admin request with token ("" for none) and returns the
// recorded answer.
func (e *admEnv) do(t *testing.T, method, path, token, body string) *httptest.ResponseRecorder {
	return serve(t, e.h, nextSource(&e.sources), method, path, token, body)
}

// audits returns the decoded "audit" log lines.
func (e *admEnv) audits(t *testing.T) []map[string]any {
	t.Helper()
	return e.logs.MustRecords(t, "audit")
}

// wantAudit asserts the last audit line.
func (e *admEnv) wantAudit(t *testing.T, token, action, endpoint, result string) {
	t.Helper()
	a := e.audits(t)
	if len(a) == 0 {
		t.Fatalf("no audit line; logs:\n%s", e.logs)
	}
	last := a[len(a)-1]
	want := map[string]string{"token": token, "action": action, "endpoint": endpoint, "result": result}
	for k, v := range want {
		if last[k] != v {
			t.Errorf("audit %s = %v, want %q (line %v)", k, last[k], v, last)
		}
	}
}

// admDecode decodes a JSON answer into v, asserting status and content type.
func admDecode(t *testing.T, w *httptest.ResponseRecorder, status int, ctype string, v any) {
	t.Helper()
	if w.Code != status || w.Header().Get("Content-Type") != ctype {
		t.Fatalf("answer %d %q, want %d %q; body %s", w.Code, w.Header().Get("Content-Type"), status, ctype, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("body %s: %v", w.Body, err)
	}
}

// wantProblem asserts a problem+json answer of code (its status, content
// type and type) and returns it.
func wantProblem(t *testing.T, w *httptest.ResponseRecorder, code problem.Code) problem.Body {
	t.Helper()
	var pb problem.Body
	admDecode(t, w, code.Status(), "application/problem+json", &pb)
	if pb.Type != problem.TypeBase+string(code) {
		t.Fatalf("problem type %q, want %s", pb.Type, code)
	}
	return pb
}

// action POSTs an admin action with the write token and decodes its 200.
func (e *admEnv) action(t *testing.T, path, body string) api.EndpointActionResult {
	t.Helper()
	var res api.EndpointActionResult
	admDecode(t, e.do(t, "POST", path, admWriteToken, body), http.StatusOK, "application/json", &res)
	if res.Endpoint == nil {
		t.Fatalf("action %s answered without the endpoint's state: %+v", path, res)
	}
	return res
}

// openPayBreaker records two counting read failures on pay-api.
func (e *admEnv) openPayBreaker(t *testing.T) {
	t.Helper()
	br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
	for range 2 {
		if _, err := e.store.RecordResult(t.Context(), "pay-api",
			policy.ReadResult{CountsTowardBreaker: true, Breaker: br}); err != nil {
			t.Fatal(err)
		}
	}
}

// admAudit is an expected audit line: token, action, endpoint, result.
type admAudit struct{ token, action, endpoint, result string }

func TestAdminAuthAndAudit(t *testing.T) {
	tests := []struct {
		name, method, path, token, body string
		want                            problem.Code // "" = 200 with the list
		audit                           *admAudit    // nil = no audit line
	}{
		{"read token lists", "GET", "/admin/v1/endpoints", admReadToken, "", "", nil},
		{"write token lists", "GET", "/admin/v1/endpoints", admWriteToken, "", "", nil},
		{"no token", "GET", "/admin/v1/endpoints", "", "", problem.Unauthorized, nil},
		{"unknown token", "GET", "/admin/v1/endpoints/pay-api", "nope-nope-nope-nope", "", problem.Unauthorized, nil},
		{"read token cannot enable", "POST", "/admin/v1/endpoints/pay-api/enable", admReadToken, "",
			problem.Forbidden, &admAudit{"viewer", "enable", "pay-api", "forbidden"}},
		{"read token cannot disable", "POST", "/admin/v1/endpoints/pay-api/disable", admReadToken, "",
			problem.Forbidden, &admAudit{"viewer", "disable", "pay-api", "forbidden"}},
		{"no token cannot reset", "POST", "/admin/v1/endpoints/pay-api/breaker/reset", "", "",
			problem.Unauthorized, &admAudit{"", "breaker_reset", "pay-api", "unauthorized"}},
		{"unknown endpoint read", "GET", "/admin/v1/endpoints/nope", admReadToken, "", problem.UnknownEndpoint, nil},
		{"unknown endpoint write", "POST", "/admin/v1/endpoints/nope/disable", admWriteToken, "",
			problem.UnknownEndpoint, &admAudit{"ops", "disable", "nope", "unknown_endpoint"}},
		{"body not JSON", "POST", "/admin/v1/endpoints/pay-api/disable", admWriteToken, "{not json",
			problem.InvalidRequest, &admAudit{"ops", "disable", "pay-api", "invalid_request"}},
		{"body too large", "POST", "/admin/v1/endpoints/pay-api/disable", admWriteToken,
			`{"reason":"` + strings.Repeat("x", maxActionBody) + `"}`,
			problem.InvalidRequest, &admAudit{"ops", "disable", "pay-api", "invalid_request"}},
		{"GET on an action", "GET", "/admin/v1/endpoints/pay-api/enable", admWriteToken, "",
			problem.MethodNotAllowed, nil},
		{"no such admin route", "GET", "/admin/v1/nothing", admWriteToken, "", problem.NotFound, nil},
	}
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		e := newAdmEnv(t, b, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := len(e.audits(t))
				w := e.do(t, tt.method, tt.path, tt.token, tt.body)
				if tt.want == "" {
					var list api.EndpointList
					admDecode(t, w, http.StatusOK, "application/json", &list)
					if len(list.Endpoints) != 2 || list.Endpoints[0].Name != "crm-api" ||
						list.Endpoints[1].Name != "pay-api" {
						t.Fatalf("endpoints = %+v, want crm-api, pay-api", list.Endpoints)
					}
				} else {
					wantProblem(t, w, tt.want)
				}
				if tt.audit == nil {
					if n := len(e.audits(t)); n != before {
						t.Fatalf("%d new audit lines, want none", n-before)
					}
					return
				}
				e.wantAudit(t, tt.audit.token, tt.audit.action, tt.audit.endpoint, tt.audit.result)
			})
		}
		if st, err := e.store.EndpointState(t.Context(), "pay-api"); err != nil || st.Disabled {
			t.Fatalf("a refused disable changed the endpoint: %+v, %v", st, err)
		}
	})
}

// TestAdminEndpointState: GET shows the breaker as the store has it: open
// with opened_at and next_probe_at, then half_open once the interval passed.
func TestAdminEndpointState(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		e := newAdmEnv(t, b, nil)
		var doc api.EndpointDoc
		admDecode(t, e.do(t, "GET", "/admin/v1/endpoints/pay-api", admReadToken, ""), 200, "application/json", &doc)
		if doc.Breaker != "closed" || doc.Gate != "open" || doc.OpenedAt != nil || doc.NextProbeAt != nil ||
			doc.BreakerFailures != 2 || doc.BreakerProbeInterval != "1m0s" || doc.DisableAfter != "72h0m0s" {
			t.Fatalf("fresh endpoint = %+v", doc)
		}
		e.openPayBreaker(t)
		admDecode(t, e.do(t, "GET", "/admin/v1/endpoints/pay-api", admReadToken, ""), 200, "application/json", &doc)
		if doc.Breaker != "open" || doc.Gate != "breaker_open" || doc.ConsecutiveFailures != 2 ||
			doc.OpenedAt == nil || !doc.OpenedAt.Equal(admT0) || doc.NextProbeAt == nil ||
			!doc.NextProbeAt.Equal(admT0.Add(time.Minute)) || doc.OutageStartedAt == nil {
			t.Fatalf("open endpoint = %+v", doc)
		}
		e.now = admT0.Add(time.Minute)
		admDecode(t, e.do(t, "GET", "/admin/v1/endpoints/pay-api", admReadToken, ""), 200, "application/json", &doc)
		if doc.Breaker != "half_open" || doc.Gate != "half_open" || !doc.NextProbeAt.Equal(admT0.Add(time.Minute)) {
			t.Fatalf("endpoint after the interval = %+v", doc)
		}
	})
}
