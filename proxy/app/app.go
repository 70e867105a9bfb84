// Package app is the proxy's composition root: New wires every dependency
// of a loaded configuration (the store, the gate cache, the completion
// writer, the dispatcher, the replay runner, the callout and admin
// listeners, the Salesforce writer, the clock-skew monitor, metrics and
// tracing) and Run serves until its context ends, then drains. The binary
// (cmd/callout-proxy) only parses its arguments and calls them; the
// in-process test harnesses are built on the same two calls, with the
// clock, the Redis client, the listeners and the pacing injected through
// Options.
//
// A running App reloads its configuration (Reload: SIGHUP, POST
// /admin/v1/reload) without a restart: the parts that hold no state of
// their own are built again and swapped in, the store and the work in
// flight are kept (docs/configuration.md, "Reloading").
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/proxy/admin/console"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gatecache"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/inspect"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/outbox"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/pending"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/stats"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/wake"
	"github.com/calloutproxy/callout-proxy/proxy/skew"
	"github.com/calloutproxy/callout-proxy/salesforce"
)

// ConfigError marks an error of the configuration or of what it names (a
// secret, a certificate, a Redis URL): the operator fixes the file. The
// binary exits 2 on it, 1 on any other error.
type ConfigError struct{ Err error }

// Error is the wrapped error's text.
func (e ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error (a *config.Error, an os or net error).
func (e ConfigError) Unwrap() error { return e.Err }

// Options are what New needs besides the configuration. Only Config is
// required; every other field has the production default named in its
// comment.
type Options struct {
	// Config is the configuration in force at start, complete (config.Load
	// or config.Parse). Required.
	Config *config.Config
	// Load reads the configuration again for Reload (config.Load of the
	// same file). Nil: the configuration cannot be reloaded (the built-in
	// one of `callout-proxy dev`), and Reload says so.
	Load func() (*config.Config, error)
	// Getenv reads the environment: secrets, GOMEMLIMIT. Default os.Getenv
	// is not assumed: nil reads nothing (every variable empty).
	Getenv func(string) string
	// Logs receives the log lines, in log.format. Default io.Discard.
	Logs io.Writer
	// Build is the running build, reported by /healthz, the metrics and
	// the "listening" line.
	Build api.BuildInfo
	// Now is this process's wall clock: callers' token exp/nbf and the
	// certificates' validity are checked with it. Default time.Now.
	Now func() time.Time
	// SharedClock chooses the clock of everything that computes with
	// shared state, given corrected (Redis's clock as this replica reads
	// it, skew.Monitor). Default: corrected. Tests pass a fake clock.
	SharedClock func(corrected func() time.Time) func() time.Time
	// Redis, optional, is the store's client instead of the one
	// config.Redis names (the caller closes it). Tests pass a throwaway
	// redis-server's.
	Redis redis.UniversalClient
	// Listener and AdminListener, optional, are the listeners to serve
	// instead of opening Config.Listen and Config.AdminListen.
	Listener, AdminListener net.Listener
	// PinScriptTime makes the store's scripts use the Go clock's time
	// instead of Redis's TIME (redisstore.Options.PinScriptTime): for a
	// fake SharedClock.
	PinScriptTime bool
	// DispatchIdle is the dispatcher's backstop wait (dispatch.Options.Idle);
	// ReplayPollEvery how often the replay runner looks for jobs
	// (replay.Options.PollEvery); ReplaySleep its pacing wait. Zero or
	// nil: those packages' defaults (1 s, 2 s, a timer).
	DispatchIdle, ReplayPollEvery time.Duration
	ReplaySleep                   func(ctx context.Context, d time.Duration) error
	// Owner is this replica's token in locks and leases. Default: 16
	// random bytes, hex.
	Owner string
	// Reloads, optional, delivers the signals that reload the
	// configuration (SIGHUP, signal.Notify): each one calls Reload and
	// logs a rejection at error level ("reload rejected", with the
	// reason).
	Reloads <-chan os.Signal
}

// App is one running proxy: New wired it, Run serves it, Reload swaps its
// configuration. Its methods are safe for concurrent use.
type App struct {
	o        Options
	logger   *slog.Logger
	collapse *logx.Collapser
	closers  []func() // run by Run in reverse order, or by New on failure

	reg    *prometheus.Registry
	m      *metrics.Metrics
	budget *limit.Budget
	tp     trace.TracerProvider
	prop   propagation.TextMapPropagator
	certs  *certificateWatch

	rdb redis.UniversalClient
	// closeRedis closes rdb when New opened it (nil for Options.Redis);
	// it may be called more than once.
	closeRedis func()
	clocks     *skew.Monitor
	now        func() time.Time // Options.Now
	shared     func() time.Time // the shared clock
	store      *redisstore.Store
	dead       *deadletters.Store
	pending    *pending.Reader
	inspect    *inspect.Reader
	gates      *gatecache.Cache
	completer  *redisstore.Completer
	outbox     *outbox.Outbox
	jobs       *jobs.Store
	// stats counts attempts and dead letters per endpoint for the
	// console's charts and flushes them to Redis every few seconds
	// (docs/console.md "Charts"); its last flush is at stopBackground.
	stats *stats.Recorder
	// consoleSessions are the ops console's sessions, kept across reloads:
	// each generation's admin handler shares them (console.Sessions).
	consoleSessions *console.Sessions
	wakeups         <-chan struct{}
	// slots are the dispatch slots of every generation's dispatcher: a
	// retired one's attempts still running count toward the next one's
	// limits (dispatch.Slots).
	slots   *dispatch.Slots
	sf      *salesforce.Writer
	sfLoops *sfRuntime

	main, admin     *limit.Listener
	mainL           net.Listener // main, TLS-wrapped when tls_cert_file is set
	layoutLater     func(context.Context)
	stopServing     context.CancelCauseFunc
	bg              context.Context // the background work's context, set by Run
	stopBackground  context.CancelFunc
	background      sync.WaitGroup
	cfg             atomic.Pointer[config.Config] // the configuration in force
	cur             atomic.Pointer[generation]    // what serves it
	reloading       sync.Mutex                    // one Reload at a time
	retiring        sync.WaitGroup                // generations finishing their work
	stopped         atomic.Bool
	listenAddr      string
	adminListenAddr string
}

// New wires a proxy for o.Config: it connects to (or starts the embedded)
// Redis, checks the store's layout, opens both listeners and builds every
// component, but starts nothing: Run does. Errors: a ConfigError for a
// configuration problem found only now (a secret, a certificate, a TLS
// pair, a Redis URL, a listener address taken: "listen 127.0.0.1:8080:
// address already in use"), a *layout.Error for a store of
// another layout, any other error for a failure to start. Nothing stays
// open when New fails.
func New(ctx context.Context, o Options) (_ *App, err error) {
	if o.Config == nil {
		return nil, errors.New("app.New: Options.Config is required")
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SharedClock == nil {
		o.SharedClock = func(corrected func() time.Time) func() time.Time { return corrected }
	}
	if o.Owner == "" {
		o.Owner = randomToken()
	}
	a := &App{o: o, now: o.Now, consoleSessions: console.NewSessions(0, 0)}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	cfg := o.Config
	a.cfg.Store(cfg)
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	a.closers = append(a.closers, endLife)
	a.logger, a.collapse = logx.New(o.Logs, logx.Options{Format: cfg.Log.Format, Level: cfg.Log.SlogLevel(),
		CollapseInterval: cfg.Log.CollapseInterval})
	routeRedisLogs(a.logger)
	if err := a.openStore(ctx); err != nil {
		return nil, err
	}
	if err := a.observe(ctx); err != nil {
		return nil, err
	}
	if err := a.openSalesforce(); err != nil {
		return nil, err
	}
	// One subscription to other replicas' wakeups for the life of the App:
	// each generation's dispatcher listens on it.
	a.wakeups = wake.Subscribe(life, a.rdb, a.logger)
	a.slots = dispatch.NewSlots(0)
	g, err := a.newGeneration(cfg)
	if err != nil {
		return nil, err
	}
	a.cur.Store(g)
	if err := a.listen(); err != nil {
		return nil, err
	}
	return a, nil
}

// openStore connects Redis and builds the store's parts: the core, the
// gate cache over it, the completion writer, the outbox and the replay
// jobs; it checks the store's layout (keyspace cp:layout).
func (a *App) openStore(ctx context.Context) error {
	cfg := a.cfg.Load()
	a.rdb = a.o.Redis
	if a.rdb == nil {
		rdb, closeRedis, err := OpenRedis(cfg.Redis, a.o.Getenv, a.logger)
		if err != nil {
			return err
		}
		a.rdb = rdb
		var once sync.Once
		a.closeRedis = func() { once.Do(closeRedis) }
		a.closers = append(a.closers, a.closeRedis)
	}
	a.reg = prometheus.NewRegistry()
	m, err := metrics.New(a.reg)
	if err != nil {
		return err
	}
	a.m = m
	m.SetBuildInfo(a.o.Build.Version, a.o.Build.Commit, a.o.Build.BuildDate, a.o.Build.GoVersion)
	a.clocks = &skew.Monitor{Client: a.rdb, Now: a.now, Gauge: m.ClockOffset, Logger: a.logger}
	a.shared = a.o.SharedClock(a.clocks.Corrected)
	acks, err := acknowledger(ctx, cfg.Redis, a.rdb, a.logger)
	if err != nil {
		return err
	}
	// The gate cache wraps the store's core; the core tells it of this
	// replica's own gate changes (GateChanged), before the call returns.
	// Shards and Notify read the configuration in force, reloads included.
	a.store = redisstore.New(a.rdb, redisstore.Options{
		Now: a.shared, Logger: a.logger, IdempotencyRetention: cfg.Policy.IdempotencyRetention,
		DeadLetterRetention: cfg.Policy.DeadLetterRetention, Outbox: cfg.Salesforce != nil, RequireLayout: true,
		PinScriptTime: a.o.PinScriptTime, Acknowledger: acks,
		GateChanged: func(endpoint string) { a.gates.Changed(endpoint) },
		Shards: func(endpoint string) int {
			if ep, ok := a.cfg.Load().Endpoint(endpoint); ok {
				return ep.Shards
			}
			return 1
		},
		// Breakers partitioned by organisation (contract §6).
		Partitioned: func(endpoint string) bool {
			ep, ok := a.cfg.Load().Endpoint(endpoint)
			return ok && ep.PartitionedByOrganisation()
		},
		// Two organisations' open partitions open the endpoint's own
		// breaker; one where only one may call it (docs/limits.md).
		OpenPartitions: func(endpoint string) int {
			c := a.cfg.Load()
			if ep, ok := c.Endpoint(endpoint); ok && c.Organisations(ep) == 1 {
				return 1
			}
			return 2
		},
		// Whether an owner notification reaches anyone: the store's scripts
		// decide with it whether the owner is told (contract §6).
		Notify: func(endpoint string) bool {
			c := a.cfg.Load()
			ep, _ := c.Endpoint(endpoint)
			return c.CanNotify(ep)
		},
	})
	a.gates = gatecache.New(a.store, a.rdb, gatecache.Options{MaxStale: cfg.Redis.GateStaleness, Now: a.shared,
		Logger: a.logger})
	// The later layout check ends Run with its cause (stopServing, set by
	// Run): a store found, once Redis answers, to have another layout.
	a.layoutLater, err = checkLayout(ctx, a.store, a.logger, func(cause error) { a.stopServing(cause) })
	if err != nil {
		return err
	}
	if err := registerGateCache(a.gates, a.reg); err != nil {
		return err
	}
	// One completion writer per replica: the completions of concurrent
	// requests and dispatched attempts share a pipeline.
	a.completer = redisstore.NewCompleter(a.store, batch.Options{})
	a.closers = append(a.closers, a.completer.Close) // Run closes it first, after the work under way
	a.outbox = outbox.New(a.rdb, outbox.Options{Now: a.shared, DeadLetterRetention: cfg.Policy.DeadLetterRetention,
		Scripts: a.store.Scripts()})
	a.pending = pending.New(a.rdb, a.store)
	a.inspect = inspect.New(a.rdb, a.store)
	a.dead = deadletters.New(a.rdb, a.store, deadletters.Options{Now: a.shared, PinScriptTime: a.o.PinScriptTime,
		Scripts: a.store.Scripts()})
	a.jobs = jobs.New(a.rdb, jobs.Options{Now: a.shared, PinScriptTime: a.o.PinScriptTime, Scripts: a.store.Scripts()})
	a.stats = stats.New(a.rdb, stats.Options{Now: a.shared, Logger: a.logger})
	return nil
}

// observe builds what watches the process: the memory budget, the
// certificates' metrics and tracing.
func (a *App) observe(ctx context.Context) error {
	cfg := a.cfg.Load()
	var err error
	if a.budget, err = memoryBudget(cfg.Limits, a.o.Getenv, a.reg, a.logger); err != nil {
		return err
	}
	if a.certs, err = newCertificateWatch(a.now, a.reg); err != nil {
		return err
	}
	tp, prop, stopTracing, err := newTracing(ctx, cfg.Tracing, a.o.Build.Version, a.logger)
	if err != nil {
		return err
	}
	a.tp, a.prop = tp, prop
	a.closers = append(a.closers, stopTracing)
	return nil
}

// Run serves until ctx ends (SIGTERM), then shuts down gracefully: /readyz
// turns 503, new connections stop, in-flight callouts get up to their
// attempt limit to finish (DrainGrace), the queued completions are
// written, and everything New opened is closed. Call it once. It returns
// nil after a clean shutdown, the *layout.Error that stopped
// the proxy when the store turned out to have another layout, or the
// error of a listener that failed.
func (a *App) Run(ctx context.Context) (err error) {
	defer a.close()
	serving, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.stopServing = cancel // the layout check's
	a.bg, a.stopBackground = context.WithCancel(context.WithoutCancel(ctx))
	a.runBackground()
	a.startGeneration(a.cur.Load(), nil)
	cfg := a.cfg.Load()
	err = a.serve(serving, slog.String("redis", cfg.Redis.String()), slog.Bool("redis_embedded", cfg.Redis.Embedded()),
		slog.String("version", a.o.Build.Version), slog.String("commit", a.o.Build.Commit))
	var le *layout.Error
	if cause := context.Cause(serving); err == nil && errors.As(cause, &le) {
		err = cause
	}
	// The listeners are closed: stop claiming, let attempts under way
	// finish and be recorded (each is bounded by its attempt limit).
	a.stopped.Store(true)
	a.reloading.Lock() // no reload from here on
	a.retire(a.cur.Load())
	a.stopBackground()
	a.awaitBackground()
	a.completer.Close()
	a.logger.Info("stopped")
	return err
}

// shutdownPatience is how long shutdown waits for the loops it stopped
// before it asks whether Redis still answers (awaitBackground).
const shutdownPatience = time.Second

// awaitBackground waits for the stopped loops and the retired
// generations' attempts. A loop blocked in a read of a hung Redis is not
// woken by its cancelled context (go-redis's reads wait for the socket):
// so after shutdownPatience, if Redis does not answer a PING within
// 500 ms, it closes the Redis client New opened, which fails those reads
// at once, and then waits for the rest. A Redis that answers is never
// closed here: the attempts under way finish (each within its attempt
// limit) and the completion writer flushes what they queued before Run
// closes anything.
func (a *App) awaitBackground() {
	done := make(chan struct{})
	go func() {
		a.retiring.Wait()
		a.background.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(shutdownPatience):
	}
	if a.closeRedis != nil && !a.redisAnswers() {
		a.logger.Warn("shutting down: Redis does not answer; closing its connections so the work waiting on it ends")
		a.closeRedis()
	}
	<-done
}

// redisAnswers reports whether Redis answers a PING within 500 ms.
func (a *App) redisAnswers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return a.rdb.Ping(ctx).Err() == nil
}

// runBackground starts the long-lived loops: the gate cache, the skew
// monitor, the Salesforce writer and its reprocessing, the layout recheck
// and the log collapser.
func (a *App) runBackground() {
	bg := a.bg
	a.background.Go(func() { _ = a.gates.Run(bg) })
	a.background.Go(func() { a.clocks.Run(bg) })
	a.background.Go(func() { a.stats.Run(bg) })
	if a.sf != nil {
		a.background.Go(func() { a.sf.Run(bg) })
		a.background.Go(func() { a.sfLoops.run(bg) })
	}
	if a.layoutLater != nil {
		a.background.Go(func() { a.layoutLater(bg) })
	}
	if a.collapse != nil {
		a.background.Go(func() { a.collapse.Run(bg) })
	}
	if a.o.Reloads != nil {
		a.background.Go(func() { a.reloadOnSignal(bg, a.o.Reloads) })
	}
}

// close runs the closers in reverse order, once.
func (a *App) close() {
	if a.collapse != nil {
		a.collapse.Flush(context.Background(), true)
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// URL is the callout listener's base URL ("http://127.0.0.1:8080", https
// with tls_cert_file), AdminURL the admin listener's.
func (a *App) URL() string {
	scheme := "http://"
	if a.cfg.Load().TLSCertFile != "" {
		scheme = "https://"
	}
	return scheme + a.listenAddr
}

// AdminURL is the admin listener's base URL ("http://127.0.0.1:8081").
func (a *App) AdminURL() string { return "http://" + a.adminListenAddr }

// Store is the store's core, for tests that seed or inspect it.
func (a *App) Store() *redisstore.Store { return a.store }

// Jobs is the replay-job store, for tests that inspect it.
func (a *App) Jobs() *jobs.Store { return a.jobs }

// routeRedisLogsOnce makes routeRedisLogs set go-redis's logger once per
// process. go-redis keeps its logger in a package variable and offers
// redis.SetLogger as its only hook: global state in the library, not ours,
// which the composition root sets once, before any client exists (the
// sync.Once orders that write before every client's use even when tests
// run several proxies in one process; the first one's logger then gets the
// library's lines).
var routeRedisLogsOnce sync.Once

// routeRedisLogs sends go-redis's own log lines (reconnects, pool and
// cluster trouble, written with the standard log package by default)
// into logger as warnings with component go-redis, so every line the
// proxy writes has one format.
func routeRedisLogs(logger *slog.Logger) {
	routeRedisLogsOnce.Do(func() { redis.SetLogger(logx.RedisLogger{Logger: logger}) })
}

// randomToken is 16 random bytes, hex: this replica's name in locks.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DrainGrace is how long shutdown waits for in-flight callouts: the longest
// attempt limit in force, the policy's or any endpoint's override (Load
// sets each endpoint's effective value), plus 5 s to write the answer.
func DrainGrace(cfg *config.Config) time.Duration {
	longest := cfg.Policy.AttemptTimeout
	for _, ep := range cfg.Endpoints {
		if ep != nil && ep.AttemptTimeout > longest {
			longest = ep.AttemptTimeout
		}
	}
	return longest + 5*time.Second
}

// handlerOf serves each request with the handler pick returns at that
// moment: the generation in force, so a reload swaps handlers between two
// requests and never within one.
func handlerOf(pick func() http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { pick().ServeHTTP(w, r) })
}
