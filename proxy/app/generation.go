package app

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/calloutproxy/callout-proxy/proxy"
	adminapi "github.com/calloutproxy/callout-proxy/proxy/admin"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// generation is everything built from one configuration that keeps no
// state of its own beyond what its work in flight holds: the callers'
// verifier and the admin tokens, the forwarder (upstream credentials and
// connection pools), the breaker watcher, the dispatcher, the replay
// runner, the callout listener's server, the admin API and the backlog
// gatherer. A reload builds a new one and retires the old: its
// dispatched attempts and the requests it is serving finish on it.
type generation struct {
	cfg      *config.Config
	fwd      *forward.Forwarder
	disp     *dispatch.Dispatcher
	replays  *replay.Service
	srv      *proxy.Server
	gatherer *dispatch.Gatherer
	callout  http.Handler // srv's, with the listener's limits (routes.go)
	admin    http.Handler // the admin API with the connection-level limits

	stop context.CancelFunc
	wg   sync.WaitGroup
	// replaysDone is closed when this generation's replay runner has
	// stopped: the next one's waits for it, so a replay job is never run
	// by two runners of this replica at once (both hold its lease under
	// the same owner token).
	replaysDone chan struct{}
}

// newGeneration builds a generation for cfg. Errors: a ConfigError for a
// secret or certificate the configuration names that cannot be used.
func (a *App) newGeneration(cfg *config.Config) (*generation, error) {
	callers, err := auth.NewVerifier(cfg.Auth, a.o.Getenv, a.now)
	if err != nil {
		return nil, ConfigError{err}
	}
	admins, err := auth.NewAdminTokens(cfg.Admin, a.o.Getenv)
	if err != nil {
		return nil, ConfigError{err}
	}
	a.m.Init(cfg.EndpointNames())
	a.certs.watch(callers.Keys(), a.logger)
	g := &generation{cfg: cfg, replaysDone: make(chan struct{})}
	g.fwd = forward.New(forward.Options{
		Getenv: a.o.Getenv, Logger: a.logger, MaxResponseBytes: cfg.Policy.MaxResponseBytes, Budget: a.budget,
		Propagator: tracing.New(a.tp, a.prop).Propagator(), Now: a.shared,
	})
	// ended wakes the Salesforce writer after an ending or a disable: the
	// store queued its writes in the outbox in the same script already, so
	// nothing is lost if it never runs; it only saves waiting for the
	// writer's next tick. Without Salesforce the endings are only logged
	// and the dead letters stay in the proxy's store (contract §11).
	var ended func()
	var adminEvents adminapi.Events
	if a.sf != nil {
		ended, adminEvents = a.sf.Wake, sfEvents{a.sf}
	}
	watcher := &dispatch.Watcher{Config: cfg, Store: a.store, Metrics: a.m, Logger: a.logger, Ended: ended, Now: a.shared,
		Stats: a.stats}
	g.disp = dispatch.New(dispatch.Options{
		Now: a.shared, Config: cfg, Store: a.store, Completions: a.completer, Upstream: g.fwd, Metrics: a.m,
		Logger: a.logger, Ended: ended, Breakers: watcher, Wakeups: a.wakeups, TracerProvider: a.tp,
		Propagator: a.prop, Idle: a.o.DispatchIdle, Stats: a.stats, Slots: a.slots,
	})
	g.replays = replay.New(replay.Options{Now: a.shared, Config: cfg, Store: a.store, DeadLetters: a.dead, Logger: a.logger,
		Owner: a.o.Owner, Jobs: a.jobs, Wake: g.disp.Wake, OnReplay: onReplay(a.sf, a.logger),
		TracerProvider: a.tp, Metrics: a.m, Sleep: a.o.ReplaySleep, PollEvery: a.o.ReplayPollEvery})
	g.srv = proxy.New(proxy.Deps{
		Now: a.shared, Config: cfg, Callers: callers, Upstream: g.fwd, Store: a.store, Gates: a.gates,
		Completions: a.completer, Metrics: a.m, Breakers: watcher, Ended: ended, Wake: g.disp.Wake, Stats: a.stats,
		Logger: a.logger, Build: a.o.Build, Budget: a.budget, TracerProvider: a.tp, Propagator: a.prop,
	})
	g.callout = g.srv.Handler()
	api := adminapi.New(adminapi.Deps{
		Now: a.shared, Config: cfg, Tokens: admins, Endpoints: a.store, DeadLetters: g.replays,
		ReplayJobs: g.replays, Callouts: a.pending, Keys: a.inspect, Stats: a.stats, Events: adminEvents, Metrics: a.m,
		Gatherer: a.reg, Wake: g.disp.Wake, Logger: a.logger, Pprof: cfg.Admin.Pprof, Reload: a.Reload,
		ConsoleSessions: a.consoleSessions,
	})
	// The callout listener's handler applies its own limits (routes.go);
	// the admin listener gets the connection-level ones here.
	g.admin = limit.CloseAfterTransferEncoding(limit.BodyDeadline(cfg.Limits.BodyReadTimeout,
		limit.WriteDeadline(cfg.Limits.WriteTimeout, api)))
	g.gatherer = &dispatch.Gatherer{Config: cfg, Store: a.store, Metrics: a.m, Logger: a.logger, Owner: a.o.Owner}
	return g, nil
}

// startGeneration runs g's loops on a context of their own under the
// App's background context; its replay runner starts once prev's (nil at
// start) has stopped.
func (a *App) startGeneration(g, prev *generation) {
	ctx, stop := context.WithCancel(a.bg)
	g.stop = stop
	g.wg.Go(func() { g.disp.Run(ctx) })
	g.wg.Go(func() {
		defer close(g.replaysDone)
		if prev != nil {
			select {
			case <-prev.replaysDone:
			case <-ctx.Done():
				return
			}
		}
		g.replays.Run(ctx)
	})
	g.wg.Go(func() { g.gatherer.Run(ctx) })
	g.wg.Go(func() { g.srv.Run(ctx) })
}

// retire stops g's loops from claiming more work; in the background it
// waits for the attempts they had under way (each bounded by its attempt
// limit) and then closes g's idle upstream connections.
func (a *App) retire(g *generation) {
	if g.stop != nil {
		g.stop()
	}
	a.retiring.Go(func() {
		g.wg.Wait()
		g.disp.Wait()
		g.fwd.CloseIdleConnections()
	})
}

// logGeneration writes the line of a configuration put in force.
func (a *App) logGeneration(msg string, old, cfg *config.Config) {
	attrs := []slog.Attr{slog.String("config", cfg.Fingerprint), slog.Int("endpoints", len(cfg.Endpoints))}
	if old != nil {
		added, removed := diffNames(old.EndpointNames(), cfg.EndpointNames())
		attrs = append(attrs, slog.Any("endpoints_added", added), slog.Any("endpoints_removed", removed))
	}
	a.logger.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
}

// diffNames is what b adds to a and what it drops from it; both sorted
// inputs, sorted outputs, never nil.
func diffNames(a, b []string) (added, removed []string) {
	in := func(s []string, x string) bool {
		for _, v := range s {
			if v == x {
				return true
			}
		}
		return false
	}
	added, removed = []string{}, []string{}
	for _, x := range b {
		if !in(a, x) {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !in(b, x) {
			removed = append(removed, x)
		}
	}
	return added, removed
}
