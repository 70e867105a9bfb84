package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gatecache"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// clockRigSecret is the HS256 secret of clockRig's configuration.
const clockRigSecret = "clock-rig-secret-of-at-least-32-bytes!"

// clockRigIssuer is the org of clockRig's tokens.
const clockRigIssuer = "https://clock.my.salesforce.com"

// clockRig is the whole ingress in process: proxy.New over a real
// redisstore on miniredis, a real forwarder to an httptest upstream, a
// dispatcher, and one injected clock for all of them.
type clockRig struct {
	clock    *clocktest.Clock
	srv      *Server
	store    *redisstore.Store
	gates    *gatecache.Cache // not running unless the test runs it (watchGates)
	disp     *dispatch.Dispatcher
	registry *prometheus.Registry
	mini     *miniredis.Miniredis
	hits     atomic.Int32
}

// newClockRig builds a rig whose one endpoint "api" forwards to an
// upstream answering with status, under the default policy (72 h max_age).
func newClockRig(t *testing.T, status int) *clockRig {
	t.Helper()
	rig := &clockRig{}
	rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rig.hits.Add(1)
		w.WriteHeader(status)
	}})
	return rig
}

// rigSpec is what a rig's build varies: the upstream's handler, the
// endpoint "api"'s URL path and extra YAML lines (each indented four
// spaces), extra environment, the log sink (nil: discarded) and tracing
// (nil: off).
type rigSpec struct {
	upstream http.HandlerFunc
	path     string
	extra    string
	env      map[string]string
	logs     io.Writer
	// headerValues, optional, is the forwarder's Options.HeaderValues.
	headerValues func(ep *config.Endpoint) (http.Header, error)
	tp           trace.TracerProvider
	prop         propagation.TextMapPropagator
	// issuers, optional, are allowed beside clockRigIssuer; budget,
	// optional, is the server's memory budget.
	issuers []string
	budget  *limit.Budget
}

// build wires the rig: the upstream, the configuration, a redisstore on
// miniredis, the caller verifier, a forwarder, the breaker watcher, a
// dispatcher and the server, all on the rig's clock.
func (rig *clockRig) build(t *testing.T, spec rigSpec) {
	t.Helper()
	rig.clock = clocktest.New(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	up := httptest.NewServer(spec.upstream)
	t.Cleanup(up.Close)
	getenv := func(k string) string {
		if k == "RIG_SECRET" {
			return clockRigSecret
		}
		return spec.env[k]
	}
	issuers := append([]string{clockRigIssuer}, spec.issuers...)
	keys := "  hs256_secret_env: RIG_SECRET\n"
	if len(issuers) > 1 { // the rig's one secret, bound to each issuer explicitly (auth.issuer_keys)
		keys = "  issuer_keys:\n"
		for _, iss := range issuers {
			keys += "    - {issuer: " + iss + ", hs256_secret_env: RIG_SECRET}\n"
		}
	}
	cfg, err := config.Parse([]byte(`auth:
  issuers: [`+strings.Join(issuers, ", ")+`]
  audience: callout-proxy
  algorithms: [HS256]
`+keys+`endpoints:
  api:
    url: `+up.URL+spec.path+`
    allowed_networks: [127.0.0.0/8]
`+spec.extra), getenv)
	if err != nil {
		t.Fatal(err)
	}
	rig.mini = miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: rig.mini.Addr(), DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	logger := slog.New(slog.DiscardHandler)
	if spec.logs != nil {
		logger, _ = logx.New(spec.logs, logx.Options{}) // as the composition root makes it
	}
	rig.store = redisstore.New(rdb, redisstore.Options{PinScriptTime: true, Now: rig.clock.Now, Logger: logger,
		GateChanged: func(ep string) { rig.gates.Changed(ep) }})
	rig.gates = gatecache.New(rig.store, rdb, gatecache.Options{Now: rig.clock.Now, Logger: logger})
	rig.registry = prometheus.NewRegistry()
	m, err := metrics.New(rig.registry)
	if err != nil {
		t.Fatal(err)
	}
	callers, err := auth.NewVerifier(cfg.Auth, getenv, rig.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	fwd := forward.New(forward.Options{Getenv: getenv, Logger: logger, MaxResponseBytes: cfg.Policy.MaxResponseBytes,
		Propagator: spec.prop, HeaderValues: spec.headerValues})
	t.Cleanup(fwd.CloseIdleConnections)
	watcher := &dispatch.Watcher{Config: cfg, Store: rig.store, Metrics: m, Logger: logger,
		Now: rig.clock.Now}
	half := func() float64 { return 0.5 }
	rig.disp = dispatch.New(dispatch.Options{Config: cfg, Store: rig.store, Upstream: fwd, Metrics: m,
		Logger: logger, Breakers: watcher, Now: rig.clock.Now, Rand: half,
		TracerProvider: spec.tp, Propagator: spec.prop})
	rig.srv = New(Deps{Config: cfg, Callers: callers, Upstream: fwd, Store: rig.store, Gates: rig.gates, Metrics: m,
		Breakers: watcher, Logger: logger, Now: rig.clock.Now, Rand: half,
		TracerProvider: spec.tp, Propagator: spec.prop, Budget: spec.budget})
}

// token is a caller token of clockRigIssuer minted at the rig's now,
// valid for 10 minutes.
func (rig *clockRig) token(t *testing.T) string {
	t.Helper()
	tok, err := auth.MintHS256([]byte(clockRigSecret), clockRigIssuer, "callout-proxy", "005000000000001AAA",
		10*time.Minute, rig.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// do serves one callout request with a token minted at the rig's now.
func (rig *clockRig) do(t *testing.T, method, path string, hdr http.Header, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+rig.token(t))
	rec := httptest.NewRecorder()
	rig.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// idempotencyCount is callout_idempotency_total{result}.
func (rig *clockRig) idempotencyCount(t *testing.T, result string) float64 {
	t.Helper()
	mfs, err := rig.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "callout_idempotency_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestSameKeyWhileRetrying30HoursLater is the "the key sent again
// while its chain is still retrying" (contract §5: scheduled or held → 202
// with the same Callout-Id): a write scheduled by a 503, retried by the
// dispatcher 30 hours later (injected clock; max_age 72 h keeps the chain
// alive), then sent again with its key: 202, the same Callout-Id, no
// second chain, no extra upstream call.
func TestSameKeyWhileRetrying30HoursLater(t *testing.T) {
	rig := newClockRig(t, http.StatusServiceUnavailable)
	key := http.Header{"Idempotency-Key": {`"late-1"`}}
	first := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
	if first.Code != http.StatusAccepted {
		t.Fatalf("first: %d %s, want 202", first.Code, first.Body)
	}
	id := first.Header().Get("Callout-Id")

	rig.clock.Advance(30 * time.Hour)
	if n := rig.disp.Round(context.Background()); n != 1 {
		t.Fatalf("dispatcher claimed %d callouts 30 h later, want the 1 due retry", n)
	}
	rig.disp.Wait()

	again := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
	if again.Code != http.StatusAccepted || again.Header().Get("Callout-Id") != id {
		t.Fatalf("again: %d, Callout-Id %q; want 202 with %q: %s", again.Code, again.Header().Get("Callout-Id"), id, again.Body)
	}
	var doc api.StatusDocument
	if err := json.Unmarshal(again.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ID != id || doc.State != policy.Scheduled || len(doc.Attempts) != 2 {
		t.Errorf("status document: id %s, state %s, %d attempts; want %s scheduled after 2", doc.ID, doc.State,
			len(doc.Attempts), id)
	}
	if got := rig.hits.Load(); got != 2 {
		t.Errorf("upstream hits = %d, want 2 (first attempt and the dispatcher's retry; none for the duplicate)", got)
	}
	items, _, err := rig.store.Backlog(context.Background(), "api")
	if err != nil || items != 1 {
		t.Errorf("backlog = %d (%v), want the one chain", items, err)
	}
	if got := rig.idempotencyCount(t, "replayed"); got != 1 {
		t.Errorf(`callout_idempotency_total{result="replayed"} = %v, want 1`, got)
	}
}

// TestWriteWithoutKeyCountedMissing: callout_idempotency_total{result=
// "missing"} counts every write without a key (its help text): the POST
// and PATCH refused with 400 as well as the PUT and DELETE forwarded.
func TestWriteWithoutKeyCountedMissing(t *testing.T) {
	rig := newClockRig(t, http.StatusOK)
	tests := []struct {
		method string
		status int
	}{
		{http.MethodPost, http.StatusBadRequest},
		{http.MethodPatch, http.StatusBadRequest},
		{http.MethodPut, http.StatusOK},
		{http.MethodDelete, http.StatusOK},
	}
	for i, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			rec := rig.do(t, tt.method, "/callout/api/v1/things", nil, `{}`)
			if rec.Code != tt.status {
				t.Fatalf("%s: %d %s, want %d", tt.method, rec.Code, rec.Body, tt.status)
			}
			if got := rig.idempotencyCount(t, "missing"); got != float64(i+1) {
				t.Errorf(`callout_idempotency_total{result="missing"} = %v, want %d`, got, i+1)
			}
		})
	}
}
