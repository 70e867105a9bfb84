package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gatecache"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// roundTrips counts the Redis round trips a client makes: one per command
// sent on its own, one per pipeline (a go-redis hook). Pub/sub traffic
// does not pass through these hooks.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// benchSecret is the HS256 secret of the read benchmark's configuration.
const benchSecret = "read-bench-secret-of-at-least-32-bytes!"

// benchRig is the whole ingress of one replica in process, as
// cmd/callout-proxy wires it: a real redisstore on a Redis backend, a real
// forwarder to an httptest upstream, the production JSON logger (into
// io.Discard), real metrics, one endpoint "api".
type benchRig struct {
	srv   *Server
	store *redisstore.Store
	gates *gatecache.Cache
	rt    *roundTrips
	token string
	watch bool
}

// cached reports whether the gate cache answers for the endpoint.
func (rig *benchRig) cached() bool {
	_, ok := rig.gates.CachedAdmission("api")
	return ok
}

// newBenchRig builds a benchRig on client with the extra YAML appended to
// its configuration (a log: section, say); with watch, the store's gate
// cache runs (gatecache.Cache.Run, as cmd/callout-proxy starts it); tp is
// the TracerProvider of the ingress and the forwarder (nil: tracing off).
func newBenchRig(b *testing.B, client redis.UniversalClient, extra string, watch bool, tp trace.TracerProvider) *benchRig {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	b.Cleanup(up.Close)
	getenv := func(k string) string { return map[string]string{"BENCH_SECRET": benchSecret}[k] }
	cfg, err := config.Parse([]byte(`auth:
  issuers: [`+clockRigIssuer+`]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: BENCH_SECRET
endpoints:
  api:
    url: `+up.URL+`
    allowed_networks: [127.0.0.0/8]
`+extra), getenv)
	if err != nil {
		b.Fatal(err)
	}
	rig := &benchRig{rt: &roundTrips{}, watch: watch}
	client.AddHook(rig.rt)
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rig.store = redisstore.New(client, redisstore.Options{Logger: logger,
		GateChanged: func(ep string) { rig.gates.Changed(ep) }})
	rig.gates = gatecache.New(rig.store, client, gatecache.Options{Logger: logger})
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	callers, err := auth.NewVerifier(cfg.Auth, getenv, nil)
	if err != nil {
		b.Fatal(err)
	}
	prop := propagation.TraceContext{}
	fwd := forward.New(forward.Options{Getenv: getenv, Logger: logger, MaxResponseBytes: cfg.Policy.MaxResponseBytes,
		Propagator: tracing.New(tp, prop).Propagator()})
	b.Cleanup(fwd.CloseIdleConnections)
	watcher := &dispatch.Watcher{Config: cfg, Store: rig.store, Metrics: m, Logger: logger}
	rig.srv = New(Deps{Config: cfg, Callers: callers, Upstream: fwd, Store: rig.store, Gates: rig.gates,
		Metrics: m, Breakers: watcher, Logger: logger, TracerProvider: tp, Propagator: prop})
	if watch {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = rig.gates.Run(ctx) }()
		b.Cleanup(func() { cancel(); <-done })
	}
	rig.token, err = auth.MintHS256([]byte(benchSecret), clockRigIssuer, "callout-proxy", "005000000000001AAA",
		time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return rig
}

// run serves b.N reads of a healthy endpoint, each with the same caller
// token (Apex reuses a Named Credential's token until it expires), and
// reports the Redis round trips per read next to ns/op and allocs/op.
func (rig *benchRig) run(b *testing.B) { rig.runWant(b, http.StatusOK) }

// runWant is run with every read answered want.
func (rig *benchRig) runWant(b *testing.B, want int) {
	h := rig.srv.Handler()
	req := httptest.NewRequest(http.MethodGet, "/callout/api/v1/things?id=7", nil)
	req.Header.Set("Authorization", "Bearer "+rig.token)
	for i := 0; i < 10 || (rig.watch && !rig.cached()); i++ { // warm: keep-alive connection, scripts loaded, caches filled
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("warm-up read: %d %s", rec.Code, rec.Body)
		}
		if i > 10000 {
			b.Fatal("the gate cache did not start")
		}
	}
	b.ReportAllocs()
	start := rig.rt.n.Load()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("read: %d %s", rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64(rig.rt.n.Load()-start)/float64(b.N), "redis-rt/op")
}

// BenchmarkRead measures one read (GET without Prefer) through the whole
// ingress of one replica to a healthy endpoint: JWT check, gate, upstream
// round trip to a loopback httptest server, the access log, metrics; with
// the gate cache running (gatecache, as the binary runs) and without it
// (nocache: every read asks Redis, as before the gate cache). On each Redis
// backend redistest offers (miniredis always; the real single node and
// cluster when configured). redis-rt/op counts every round trip the
// store's client made during the loop, the gate cache's background polls
// included (gate-polls of them, each one pipeline). Benchmarks, not tests:
// `go test -run XXX -bench BenchmarkRead ./proxy/`.
func BenchmarkRead(b *testing.B) {
	for _, be := range redistest.Backends(b) {
		for _, watch := range []bool{true, false} {
			name := be.Name + "/gatecache"
			if !watch {
				name = be.Name + "/nocache"
			}
			b.Run(name, func(b *testing.B) {
				newBenchRig(b, be.Client, "", watch, nil).run(b)
			})
		}
	}
}

// BenchmarkReadLog is BenchmarkRead under each log.access setting, on the
// real single node when CALLOUT_TEST_REDIS_URL names one (else miniredis,
// whose in-process server adds its own allocations): the access log's
// share of a read's cost and allocations. Every read succeeds, so errors
// (the default) and none write no line.
func BenchmarkReadLog(b *testing.B) {
	be := redistest.SingleOrMini(b)
	for _, access := range []string{config.LogAccessAll, config.LogAccessErrors, config.LogAccessNone} {
		b.Run(be.Name+"/"+access, func(b *testing.B) {
			newBenchRig(b, be.Client, "log:\n  access: "+access+"\n", true, nil).run(b)
		})
	}
}

// BenchmarkReadBreakerOpen measures a read refused because the endpoint's
// breaker is open (503 breaker-open with Retry-After, the upstream not
// called), with and without the gate cache, on the real single node when
// configured (else miniredis).
func BenchmarkReadBreakerOpen(b *testing.B) {
	be := redistest.SingleOrMini(b)
	for _, watch := range []bool{true, false} {
		name := be.Name + "/gatecache"
		if !watch {
			name = be.Name + "/nocache"
		}
		b.Run(name, func(b *testing.B) {
			rig := newBenchRig(b, be.Client, "", watch, nil)
			br := rig.srv.d.Config.Endpoints["api"].Rules().Breaker()
			for range br.Failures {
				if _, err := rig.store.RecordResult(context.Background(), "api",
					policy.ReadResult{CountsTowardBreaker: true, Breaker: br}); err != nil {
					b.Fatal(err)
				}
			}
			rig.runWant(b, http.StatusServiceUnavailable)
		})
	}
}
