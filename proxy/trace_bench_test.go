package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
)

// benchIngress builds the callout listener over miniredis and a loopback
// upstream answering 200, with tp as its TracerProvider.
func benchIngress(b *testing.B, tp trace.TracerProvider) http.Handler {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(up.Close)
	getenv := func(k string) string { return map[string]string{"RIG_SECRET": clockRigSecret}[k] }
	cfg, err := config.Parse([]byte(`auth:
  issuers: [`+clockRigIssuer+`]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: RIG_SECRET
endpoints:
  api:
    url: `+up.URL+`
    allowed_networks: [127.0.0.0/8]
`), getenv)
	if err != nil {
		b.Fatal(err)
	}
	mr := miniredis.RunT(b)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true})
	b.Cleanup(func() { _ = rdb.Close() })
	logger := slog.New(slog.DiscardHandler)
	store := redisstore.New(rdb, redisstore.Options{Logger: logger})
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	callers, err := auth.NewVerifier(cfg.Auth, getenv, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	prop := propagation.TraceContext{}
	fwd := forward.New(forward.Options{Getenv: getenv, Logger: logger, MaxResponseBytes: cfg.Policy.MaxResponseBytes,
		Propagator: tracing.New(tp, prop).Propagator()})
	b.Cleanup(fwd.CloseIdleConnections)
	watcher := &dispatch.Watcher{Config: cfg, Store: store, Metrics: m, Logger: logger}
	return New(Deps{Config: cfg, Callers: callers, Upstream: fwd, Store: store, Metrics: m, Breakers: watcher,
		Logger: logger, TracerProvider: tp, Propagator: prop}).Handler()
}

// BenchmarkIngressTracing measures what tracing costs the callout
// listener per request (deploy/bench/BENCHMARKS.md "Tracing"): a read (GET,
// no record) and a keyed write (POST: reservation, attempt, completion),
// each carrying Apex's traceparent (flags 00), with tracing off
// (tracing.endpoint empty: a no-op provider), at sample_ratio 0 (spans made
// but not recorded; the upstream still gets a traceparent and the store a
// trace context) and at sample_ratio 1 (every span recorded and batched to
// an exporter that discards them). The store is miniredis and the upstream
// a loopback server, so the absolute figures are this machine's; the
// differences between the three are tracing's.
func BenchmarkIngressTracing(b *testing.B) {
	tok, err := auth.MintHS256([]byte(clockRigSecret), clockRigIssuer, "callout-proxy", "005000000000001AAA",
		time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"read", "keyed-write"} {
		for _, p := range tracingtest.Providers() {
			b.Run(kind+"/"+p.Name, func(b *testing.B) {
				tp := p.New(b)
				h := benchIngress(b, tp)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					var req *http.Request
					if kind == "read" {
						req = httptest.NewRequest(http.MethodGet, "/callout/api/v1/status", nil)
					} else {
						req = httptest.NewRequest(http.MethodPost, "/callout/api/v1/charges", strings.NewReader(`{"amount":1}`))
						req.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(i))
					}
					req.Header.Set("Authorization", "Bearer "+tok)
					req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("%s: %d %s", kind, rec.Code, rec.Body)
					}
				}
			})
		}
	}
}
