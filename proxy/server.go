// Package proxy is the callout listener (contract §4, §9): the callout
// ingress (/callout/…), the caller-facing status and policy documents
// (/v1/…) and health. Its routes are in routes.go. Sub-packages hold what
// it uses: forward (the upstream client and SSRF guard), auth (caller
// JWTs), config, api (the wire documents), statusdoc (a callout's status
// document), problem (errors as problem+json, domain errors by one table)
// and httpx (what both listeners share). The store comes in through the
// Store interface (proxy/redisstore implements it). The admin listener is
// proxy/admin; cmd/callout-proxy wires both.
package proxy

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/attempt"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/statusdoc"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// CallerAuth authenticates callers (contract §9). *auth.Verifier implements it.
type CallerAuth interface {
	// Verify checks an Authorization header value; errors are *problem.Error.
	Verify(authorization string) (auth.Caller, error)
	// AllowedOn refuses a caller whose issuer the endpoint does not accept.
	AllowedOn(c auth.Caller, ep *config.Endpoint) error
}

// Upstream makes one attempt. *forward.Forwarder implements it.
type Upstream interface {
	Do(ctx context.Context, ep *config.Endpoint, req *forward.Request) forward.Attempt
}

// Store is what the ingress needs of the Redis store.
// *redisstore.Store implements it.
type Store interface {
	// Ping reports whether Redis answers; the error wraps the cause.
	Ping(ctx context.Context) error
	// Admit decides a read's gate in Redis (one round trip) and takes the
	// half-open probe token for it.
	Admit(ctx context.Context, endpoint string, br policy.BreakerSettings) (policy.Admission, error)
	RecordResult(ctx context.Context, endpoint string, r policy.ReadResult) (policy.BreakerChange, error)
	Begin(ctx context.Context, nc policy.NewCallout, o policy.BeginOptions) (policy.BeginResult, error)
	Enqueue(ctx context.Context, nc policy.NewCallout, o policy.EnqueueOptions) (policy.EnqueueResult, error)
	Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error)
	Release(ctx context.Context, cl *policy.Claimed) error
	Get(ctx context.Context, id string) (*policy.Callout, error)
}

// Gates decides a read's gate (contract §4, §6) through the replica's gate
// cache (ARCHITECTURE.md "Hot-path budget"). *gatecache.Cache implements it.
type Gates interface {
	// CachedAdmission answers from memory when the cached gate is fresh
	// (no round trip); ok false: call Admit.
	CachedAdmission(endpoint string) (a policy.Admission, ok bool)
	// Admit is Store.Admit, whose reply the cache keeps.
	Admit(ctx context.Context, endpoint string, br policy.BreakerSettings) (policy.Admission, error)
}

// uncached is Gates without a cache: every read asks Store.Admit.
type uncached struct{ Store }

func (uncached) CachedAdmission(string) (policy.Admission, bool) { return policy.Admission{}, false }

// BreakerWatcher is told what each result did to its endpoint's breaker
// (metrics, logs, auto-disable); *dispatch.Watcher implements it.
type BreakerWatcher interface {
	Changed(ctx context.Context, ep *config.Endpoint, ch policy.BreakerChange)
}

// Deps are the server's dependencies; every one is explicit. All are
// required unless their comment says otherwise.
type Deps struct {
	Config   *config.Config
	Callers  CallerAuth
	Upstream Upstream
	Store    Store
	// Gates, optional, is the replica's gate cache, which reads consult
	// before asking Redis; nil: every read asks Store.Admit.
	Gates Gates
	// Completions, optional, writes the completions of synchronous
	// attempts (*redisstore.Completer pipelines those of concurrent
	// requests); nil: Store.Complete, one round trip each.
	Completions attempt.Completions
	Metrics     *metrics.Metrics
	// Breakers is told what each result did to its endpoint's breaker.
	Breakers BreakerWatcher
	// Ended, optional, is called after a synchronous attempt ended its
	// callout as a dead letter (an ambiguous write, inline exhaustion),
	// whose Salesforce writes the store queued in the outbox: the Salesforce
	// writer's Wake; it must not block.
	Ended func()
	// Stats, optional, counts every attempt and dead letter for the
	// console's charts (proxy/redisstore/stats); it must not block.
	Stats attempt.Stats
	// Wake, optional, starts this replica's dispatcher at once after a
	// respond-async callout was recorded.
	Wake func()
	// Budget, optional, is the memory budget (limits.max_inflight_bytes)
	// of callout requests: their header fields, bodies and buffered
	// responses are held in it until the answer is written; nil: no budget.
	// Pass the forwarder the same one.
	Budget *limit.Budget
	// TracerProvider, optional, makes the spans of each callout's admission
	// and synchronous attempts (docs/tracing.md); nil or a no-op provider:
	// tracing off, no trace context read, stored or sent.
	TracerProvider trace.TracerProvider
	// Propagator reads the caller's trace context (W3C Trace Context:
	// propagation.TraceContext, the default when nil). Pass the forwarder
	// the same one.
	Propagator propagation.TextMapPropagator
	Logger     *slog.Logger
	// Now is the clock (time.Now when nil); Rand the jitter source in
	// [0,1) (math/rand/v2 when nil).
	Now  func() time.Time
	Rand func() float64
	// Build is reported by /healthz: version, commit, build date, Go.
	Build api.BuildInfo
}

// Server serves the callout listener.
type Server struct {
	d Deps
	// redactions are the endpoints' redaction rules (contract §7).
	redactions statusdoc.Redactions
	// rejections samples the "rejected" log records.
	rejections *rejectionLog
	// tr makes the spans; nil when tracing is off.
	tr *tracing.Tracer
	// attempts makes every synchronous and inline attempt (proxy/attempt,
	// the dispatcher's runner too).
	attempts *attempt.Runner
	draining atomic.Bool
}

// New returns a Server over d, filling Now with time.Now when nil.
func New(d Deps) *Server {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Rand == nil {
		d.Rand = rand.Float64
	}
	if d.Completions == nil {
		d.Completions = d.Store
	}
	if d.Gates == nil {
		d.Gates = uncached{d.Store}
	}
	tr := tracing.New(d.TracerProvider, d.Propagator)
	return &Server{d: d, redactions: statusdoc.NewRedactions(d.Config), rejections: newRejectionLog(d.Logger, d.Now),
		tr: tr, attempts: &attempt.Runner{Config: d.Config, Upstream: d.Upstream, Completions: d.Completions,
			Releaser: d.Store, Breakers: d.Breakers, Metrics: d.Metrics, Logger: d.Logger, Tracer: tr, Now: d.Now,
			Rand: d.Rand, Ended: d.Ended, Stats: d.Stats, StoreTimeout: storeOpTimeout}}
}

// Drain makes /readyz fail so load balancers stop sending new callouts
// while in-flight ones finish (graceful shutdown on SIGTERM).
func (s *Server) Drain() { s.draining.Store(true) }

// Handler is the callout listener: /callout/, /v1/, /healthz, /readyz.
func (s *Server) Handler() http.Handler { return s.routes() }
