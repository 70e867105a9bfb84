package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy"
	adminapi "github.com/calloutproxy/callout-proxy/proxy/admin"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gatecache"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/outbox"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/calloutproxy/callout-proxy/proxy/skew"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// serve is the composition root: it loads the configuration, wires every
// dependency, listens on both listeners and shuts down gracefully when ctx
// ends (SIGTERM): /readyz turns 503, new connections stop, in-flight
// callouts get up to their attempt limit to finish.
func serve(ctx context.Context, configPath string, getenv func(string) string, stderr io.Writer) (err error) {
	// stopServing ends the proxy with its cause: a store found, once Redis
	// answers, to have another layout (checkLayout).
	ctx, stopServing := context.WithCancelCause(ctx)
	defer func() {
		var le *layout.Error
		if cause := context.Cause(ctx); err == nil && errors.As(cause, &le) {
			err = cause
		}
		stopServing(nil)
	}()
	cfg, err := config.Load(configPath, getenv)
	if err != nil {
		return usageError{err}
	}
	logger, collapser := logx.New(stderr, logx.Options{Format: cfg.Log.Format, Level: cfg.Log.SlogLevel(),
		CollapseInterval: cfg.Log.CollapseInterval})
	if collapser != nil {
		defer collapser.Flush(context.WithoutCancel(ctx), true)
	}
	routeRedisLogs(logger)
	rdb, closeRedis, err := openRedis(cfg.Redis, getenv, logger)
	if err != nil {
		return err
	}
	defer closeRedis()

	// now is this process's wall clock: it checks callers' token exp/nbf
	// and certificates. shared (below) is Redis's clock as this replica
	// reads it, for everything that computes with shared state.
	now, err := processClock(getenv)
	if err != nil {
		return usageError{err}
	}
	callers, err := auth.NewVerifier(cfg.Auth, getenv, now)
	if err != nil {
		return usageError{err}
	}
	admins, err := auth.NewAdminTokens(cfg.Admin, getenv)
	if err != nil {
		return usageError{err}
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		return err
	}
	build := buildInfo()
	m.SetBuildInfo(build.Version, build.Commit, build.BuildDate, build.GoVersion)
	m.Init(cfg.EndpointNames())
	if err := watchCertificates(callers.Keys(), now, logger, reg); err != nil {
		return err
	}
	budget, err := memoryBudget(cfg.Limits, getenv, reg, logger)
	if err != nil {
		return err
	}
	tp, prop, stopTracing, err := newTracing(ctx, cfg.Tracing, logger)
	if err != nil {
		return err
	}
	defer stopTracing() // after the attempts under way ended (wg.Wait below)
	fwd := forward.New(forward.Options{
		Getenv: getenv, Logger: logger, MaxResponseBytes: cfg.Policy.MaxResponseBytes, Budget: budget,
		Propagator: tracing.New(tp, prop).Propagator(),
	})
	defer fwd.CloseIdleConnections()

	clocks := &skew.Monitor{Client: rdb, Now: now, Gauge: m.ClockOffset, Logger: logger}
	shared := sharedClock(getenv, clocks.Corrected, now)
	acks, err := acknowledger(ctx, cfg.Redis, rdb, logger)
	if err != nil {
		return err
	}
	// The gate cache wraps the store's core; the core tells it of this
	// replica's own gate changes (GateChanged), before the call returns.
	var gates *gatecache.Cache
	store := redisstore.New(rdb, redisstore.Options{
		Now: shared, Logger: logger, IdempotencyRetention: cfg.Policy.IdempotencyRetention,
		DeadLetterRetention: cfg.Policy.DeadLetterRetention, Outbox: cfg.Salesforce != nil, RequireLayout: true,
		Acknowledger: acks, GateChanged: func(endpoint string) { gates.Changed(endpoint) },
		Shards: func(endpoint string) int {
			if ep, ok := cfg.Endpoint(endpoint); ok {
				return ep.Shards
			}
			return 1
		},
		// Breakers partitioned by organisation (contract §6).
		Partitioned: func(endpoint string) bool {
			ep, ok := cfg.Endpoint(endpoint)
			return ok && ep.PartitionedByOrganisation()
		},
		// Two organisations' open partitions open the endpoint's own
		// breaker; one where only one may call it (docs/limits.md).
		OpenPartitions: func(endpoint string) int {
			ep, ok := cfg.Endpoint(endpoint)
			if ok && (len(ep.AllowedIssuers) == 1 || len(ep.AllowedIssuers) == 0 && len(cfg.Auth.Issuers) == 1) {
				return 1
			}
			return 2
		},
		// Whether an owner notification reaches anyone: the store's scripts
		// decide with it whether the owner is told (contract §6).
		Notify: func(endpoint string) bool {
			ep, _ := cfg.Endpoint(endpoint)
			return cfg.CanNotify(ep)
		},
	})
	gates = gatecache.New(store, rdb, gatecache.Options{MaxStale: cfg.Redis.GateStaleness, Now: shared, Logger: logger})
	// The store's layout (keyspace cp:layout) must be this binary's before
	// anything reads or writes it.
	layoutLater, err := checkLayout(ctx, store, logger, stopServing)
	if err != nil {
		return err
	}
	if err := registerGateCache(gates, reg); err != nil {
		return err
	}
	// One completion writer per replica: the completions of concurrent
	// requests and dispatched attempts share a pipeline (Close, below,
	// writes what is queued once both have stopped).
	completer := redisstore.NewCompleter(store, batch.Options{})
	defer completer.Close()
	// With a salesforce section, dead letters, completions and owner
	// notifications go through the durable outbox to Salesforce.
	ob := outbox.New(rdb, outbox.Options{Now: shared, DeadLetterRetention: cfg.Policy.DeadLetterRetention})
	sf, err := newSalesforceWriter(cfg, store, ob, reg, getenv, logger, randomToken(), tp)
	if err != nil {
		return usageError{err}
	}
	// ended wakes the Salesforce writer after an ending or a disable: the
	// store queued its writes in the outbox in the same script already, so
	// nothing is lost if it never runs; it only saves waiting for the
	// writer's next tick. Without Salesforce the endings are only logged
	// and the dead letters stay in the proxy's store (contract §11).
	var ended func()
	var adminEvents adminapi.Events
	if sf != nil {
		ended, adminEvents = sf.Wake, sfEvents{sf}
	}
	watcher := &dispatch.Watcher{Config: cfg, Store: store, Metrics: m, Logger: logger, Ended: ended, Now: shared}
	disp := dispatch.New(dispatch.Options{
		Now: shared, Config: cfg, Store: store, Completions: completer, Upstream: fwd, Metrics: m, Logger: logger,
		Ended: ended, Breakers: watcher, Wakeups: store.Wakeups(ctx), TracerProvider: tp, Propagator: prop,
	})
	replays := replay.New(replay.Options{Now: shared, Config: cfg, Store: store, Logger: logger, Owner: randomToken(),
		Jobs: jobs.New(rdb, jobs.Options{Now: shared}), Wake: disp.Wake,
		OnReplay: onReplay(sf, logger), TracerProvider: tp, Metrics: m})
	reprocessor, err := newReprocessor(cfg, sf, replays, ob, store, rdb)
	if err != nil {
		return err
	}
	subscription, closeSubscription, err := newSubscription(cfg, sf, reprocessor, rdb)
	if err != nil {
		return err
	}
	defer closeSubscription()
	srv := proxy.New(proxy.Deps{
		Now: shared, Config: cfg, Callers: callers, Upstream: fwd, Store: store, Gates: gates, Completions: completer,
		Metrics: m, Breakers: watcher, Ended: ended, Wake: disp.Wake,
		Logger: logger, Build: build, Budget: budget, TracerProvider: tp, Propagator: prop,
	})
	adminAPI := adminapi.New(adminapi.Deps{
		Now: shared, Config: cfg, Tokens: admins, Endpoints: store, DeadLetters: replays, ReplayJobs: replays,
		Callouts: store, Keys: store,
		Events: adminEvents, Metrics: m, Gatherer: reg, Wake: disp.Wake, Logger: logger, Pprof: cfg.Admin.Pprof,
	})
	gatherer := &dispatch.Gatherer{Config: cfg, Store: store, Metrics: m, Logger: logger, Owner: randomToken()}

	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = gates.Run(bg) })
	wg.Go(func() { disp.Run(bg) })
	wg.Go(func() { clocks.Run(bg) })
	wg.Go(func() { gatherer.Run(bg) })
	if sf != nil {
		wg.Go(func() { sf.Run(bg) })
		if subscription != nil { // the polls run only while its stream is down
			wg.Go(func() { subscription.Run(bg) })
		} else {
			wg.Go(func() { reprocessor.Run(bg) })
		}
	}
	wg.Go(func() { replays.Run(bg) })
	if layoutLater != nil {
		wg.Go(func() { layoutLater(bg) })
	}
	wg.Go(func() { srv.Run(bg) })
	if collapser != nil {
		wg.Go(func() { collapser.Run(bg) })
	}
	err = listenAndServe(ctx, cfg, srv, adminAPI, reg, logger,
		slog.String("redis", cfg.Redis.String()), slog.Bool("redis_embedded", cfg.Redis.Embedded()),
		slog.String("version", build.Version), slog.String("commit", build.Commit))
	// The listeners are closed: stop claiming, let attempts under way
	// finish and be recorded (each is bounded by its attempt limit).
	stopBackground()
	wg.Wait()
	completer.Close()
	logger.Info("stopped")
	return err
}

// redisLogsOnce makes routeRedisLogs set go-redis's logger once per
// process. go-redis keeps its logger in a package variable and offers
// redis.SetLogger as its only hook: global state in the library, not ours,
// which the composition root sets once, before any client exists (the
// sync.Once orders that write before every client's use even when tests
// run several proxies in one process; the first one's logger then gets the
// library's lines).
var redisLogsOnce sync.Once

// routeRedisLogs sends go-redis's own log lines (reconnects, pool and
// cluster trouble, written with the standard log package by default)
// into logger as warnings with component go-redis, so every line the
// proxy writes has one format.
func routeRedisLogs(logger *slog.Logger) {
	redisLogsOnce.Do(func() { redis.SetLogger(logx.RedisLogger{Logger: logger}) })
}

// randomToken is 16 random bytes, hex: this replica's name in locks.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// drainGrace is how long shutdown waits for in-flight callouts: the longest
// attempt limit in force, the policy's or any endpoint's override (Load
// sets each endpoint's effective value), plus 5 s to write the answer.
func drainGrace(cfg *config.Config) time.Duration {
	longest := cfg.Policy.AttemptTimeout
	for _, ep := range cfg.Endpoints {
		if ep != nil && ep.AttemptTimeout > longest {
			longest = ep.AttemptTimeout
		}
	}
	return longest + 5*time.Second
}
