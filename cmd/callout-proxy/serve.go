package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
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
		var le *redisstore.LayoutError
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

	store := redisstore.New(rdb, redisstore.Options{
		Now: now, Logger: logger, IdempotencyRetention: cfg.Policy.IdempotencyRetention,
		DeadLetterRetention: cfg.Policy.DeadLetterRetention, Outbox: cfg.Salesforce != nil, RequireLayout: true,
		Shards: func(endpoint string) int {
			if ep, ok := cfg.Endpoint(endpoint); ok {
				return ep.Shards
			}
			return 1
		},
		// Whether an owner notification reaches anyone: the store's scripts
		// decide with it whether the owner is told (contract §6).
		Notify: func(endpoint string) bool {
			ep, _ := cfg.Endpoint(endpoint)
			return cfg.CanNotify(ep)
		},
	})
	// The store's layout (keyspace cp:layout) must be this binary's before
	// anything reads or writes it.
	layoutLater, err := checkLayout(ctx, store, logger, stopServing)
	if err != nil {
		return err
	}
	if err := registerGateCache(store, reg); err != nil {
		return err
	}
	// One completion writer per replica: the completions of concurrent
	// requests and dispatched attempts share a pipeline (Close, below,
	// writes what is queued once both have stopped).
	completer := redisstore.NewCompleter(store, redisstore.CompleterOptions{})
	defer completer.Close()
	// With a salesforce section, dead letters, completions and owner
	// notifications go through the durable outbox to Salesforce.
	ob := outbox.New(rdb, outbox.Options{Now: now, DeadLetterRetention: cfg.Policy.DeadLetterRetention})
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
	watcher := &dispatch.Watcher{Config: cfg, Store: store, Metrics: m, Logger: logger, Ended: ended}
	disp := dispatch.New(dispatch.Options{
		Config: cfg, Store: store, Completions: completer, Upstream: fwd, Metrics: m, Logger: logger,
		Ended: ended, Breakers: watcher, Wakeups: store.Wakeups(ctx), TracerProvider: tp, Propagator: prop,
	})
	replays := replay.New(replay.Options{Config: cfg, Store: store, Logger: logger, Owner: randomToken(),
		Jobs: redisstore.NewReplayStore(store, redisstore.ReplayStoreOptions{}), Wake: disp.Wake,
		OnReplay: onReplay(sf, logger), TracerProvider: tp, Metrics: m})
	reprocessor, err := newReprocessor(sf, replays, ob)
	if err != nil {
		return err
	}
	srv := proxy.New(proxy.Deps{
		Config: cfg, Callers: callers, Upstream: fwd, Store: store, Completions: completer,
		Metrics: m, Breakers: watcher, Ended: ended, Wake: disp.Wake,
		Logger: logger, Build: build, Budget: budget, TracerProvider: tp, Propagator: prop,
	})
	adminAPI := adminapi.New(adminapi.Deps{
		Config: cfg, Tokens: admins, Endpoints: store, DeadLetters: replays, ReplayJobs: replays,
		Callouts: store, Keys: store,
		Events: adminEvents, Metrics: m, Gatherer: reg, Wake: disp.Wake, Logger: logger, Pprof: cfg.Admin.Pprof,
	})
	gatherer := &dispatch.Gatherer{Config: cfg, Store: store, Metrics: m, Logger: logger, Owner: randomToken()}

	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = store.WatchGates(bg, redisstore.GateCacheOptions{MaxStale: cfg.Redis.GateStaleness}) })
	wg.Go(func() { disp.Run(bg) })
	wg.Go(func() { (&skew.Monitor{Client: rdb, Now: now, Gauge: m.ClockOffset, Logger: logger}).Run(bg) })
	wg.Go(func() { gatherer.Run(bg) })
	if sf != nil {
		wg.Go(func() { sf.Run(bg) })
		wg.Go(func() { reprocessor.Run(bg) })
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

// openRedis connects to the configured Redis (single node or Cluster), or
// starts the embedded in-memory one with a loud warning when none is set.
func openRedis(rc config.Redis, getenv func(string) string, logger *slog.Logger) (redis.UniversalClient, func(), error) {
	password := ""
	if rc.PasswordEnv != "" {
		password = getenv(rc.PasswordEnv)
	}
	switch {
	case rc.URL != "":
		opt, err := redis.ParseURL(rc.URL)
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("redis.url: %w", err)}
		}
		if password != "" {
			opt.Password = password
		}
		// Honour context deadlines on the socket, not only the 3–5 s
		// read/dial timeouts: /readyz and the write path bound their Redis
		// check, and a hung Redis must not make them outwait a probe's or
		// an Apex callout's timeout (contract §4, §9).
		opt.ContextTimeoutEnabled = true
		c := redis.NewClient(opt)
		return c, func() { c.Close() }, nil
	case len(rc.Cluster) > 0:
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Cluster, Password: password,
			ContextTimeoutEnabled: true})
		return c, func() { c.Close() }, nil
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, nil, fmt.Errorf("embedded redis: %w", err)
	}
	logger.Warn("NO REDIS CONFIGURED: running on an embedded in-memory Redis. NOTHING IS DURABLE: " +
		"scheduled retries, idempotency records and dead letters are lost when this process exits, " +
		"and only this one replica can use them. Set redis.url or redis.cluster for production.")
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return c, func() { c.Close(); m.Close() }, nil
}
