package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// ErrReloadRejected matches every error of a rejected Reload: the
// configuration in force is unchanged. The error's text says why: the
// file's problems (each a *config.Error), a key that only a restart
// applies, or that this proxy has no file to read.
var ErrReloadRejected = errors.New("reload rejected; the configuration in force is unchanged")

// Reload reads the configuration again (Options.Load), validates it as a
// start would, and puts it in force without a restart: the endpoints, the
// upstream credentials, the callers' and admin tokens, the policy and the
// per-request limits. The store, the Redis connection, the listeners and
// the work in flight are kept: requests already being served and attempts
// already dispatched finish under the configuration they started with;
// every later one uses the new. Reloads are serialized.
//
// It returns the new configuration's fingerprint (config.Fingerprint)
// when it is in force, and an error
// matching ErrReloadRejected otherwise, nothing changed: the file has
// problems (all of them listed, as `validate` lists them), a key changed
// that only a restart applies (restartOnly names them:
// docs/configuration.md, "Reloading"), a secret or certificate it names
// cannot be used, the proxy is shutting down, or it has no file to read
// (the built-in configuration of `callout-proxy dev`). SIGHUP and POST
// /admin/v1/reload call it.
func (a *App) Reload(ctx context.Context) (fingerprint string, err error) {
	a.reloading.Lock()
	defer a.reloading.Unlock()
	if a.stopped.Load() || a.bg == nil || a.bg.Err() != nil {
		return "", fmt.Errorf("%w: the proxy is not serving (starting or shutting down)", ErrReloadRejected)
	}
	if a.o.Load == nil {
		return "", fmt.Errorf("%w: this proxy runs a built-in configuration (callout-proxy dev): there is no file "+
			"to read again; restart it with --config FILE to change it", ErrReloadRejected)
	}
	cfg, err := a.o.Load()
	old := a.cfg.Load()
	if err != nil {
		// One pass: the file's problems and, of what it decoded, the
		// restart-only keys it changes (those with a problem of their own
		// are named once, as problems).
		if keys := restartOnlyBesides(old, cfg, err); len(keys) > 0 {
			return "", fmt.Errorf("%w: %w\nand these keys changed and are applied only by a restart: %s",
				ErrReloadRejected, err, strings.Join(keys, ", "))
		}
		return "", fmt.Errorf("%w: %w", ErrReloadRejected, err)
	}
	if keys := restartOnly(old, cfg); len(keys) > 0 {
		return "", fmt.Errorf("%w: these keys changed and are applied only by a restart: %s (change them back, "+
			"or restart the proxy)", ErrReloadRejected, strings.Join(keys, ", "))
	}
	g, err := a.newGeneration(cfg)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrReloadRejected, err)
	}
	prev := a.cur.Load()
	a.startGeneration(g, prev)
	a.cur.Store(g)
	a.cfg.Store(cfg)
	// The organisation shares follow the new configuration: a fair share
	// is resolved from auth.issuers, so adding an issuer changes it.
	a.main.SetShare(cfg.Limits.MaxConnectionsPerIssuer)
	a.budget.SetShare(cfg.Limits.MaxInflightBytesPerIssuer)
	// An issuer removed from auth.issuers holds no connection any more:
	// its tokens no longer verify, and what it holds must not keep the
	// listener full for the others (with one issuer left no share applies).
	if closed, cut := a.main.Offboard(func(org string) bool { return slices.Contains(cfg.Auth.Issuers, org) }); closed+cut > 0 {
		a.logger.Info("connections of removed issuers closed", slog.Int("idle", closed), slog.Int("cut", cut))
	}
	a.retire(prev)
	a.openToMore(old, cfg)
	a.logGeneration("configuration reloaded", old, cfg)
	return cfg.Fingerprint, nil
}

// openToMore closes the own breaker of each endpoint partitioned by
// organisation that one organisation alone could call under old and
// several may call under cfg
// (redisstore.Store.CloseEndpointBreaker: that organisation's open
// partition had opened it, and must hold only its own callouts now,
// contract §6). A store error is logged: the breaker then closes at its
// next probe, as before.
func (a *App) openToMore(old, cfg *config.Config) {
	for _, name := range cfg.EndpointNames() {
		ep, _ := cfg.Endpoint(name)
		was, ok := old.Endpoint(name)
		if !ok || !ep.PartitionedByOrganisation() || !was.PartitionedByOrganisation() ||
			old.Organisations(was) != 1 || cfg.Organisations(ep) < 2 {
			continue
		}
		ctx, cancel := context.WithTimeout(a.bg, 5*time.Second)
		if err := a.store.CloseEndpointBreaker(ctx, name); err != nil {
			a.logger.Warn("closing the breaker of an endpoint opened to more organisations failed",
				slog.String("endpoint", name), slog.Any("error", err))
		}
		cancel()
	}
}

// restartOnly lists the keys whose change next's reload cannot apply
// while the proxy runs, in file order; empty when next can be put in
// force. They are the listeners and their TLS (sockets are open), the
// connection-level limits (the listeners' caps and timeouts, the memory
// budget), redis (the store's connection), the retention periods the
// store was built with, tracing and log's level, format and collapsing
// (the exporter and the logger every part holds; log.access is the
// callout listener's and reloads), salesforce (its writer, login and subscription),
// an endpoint's shards (its queue's keys), and, with a salesforce
// section, what the Salesforce writer knows of the endpoints (which
// exist, their owner, redact and completion_events).
func restartOnly(cur, next *config.Config) []string {
	var keys []string
	diff := func(key string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			keys = append(keys, key)
		}
	}
	diff("listen", cur.Listen, next.Listen)
	diff("admin_listen", cur.AdminListen, next.AdminListen)
	diff("tls_cert_file", cur.TLSCertFile, next.TLSCertFile)
	diff("tls_key_file", cur.TLSKeyFile, next.TLSKeyFile)
	diff("redis", cur.Redis, next.Redis)
	diff("policy.idempotency_retention", cur.Policy.IdempotencyRetention, next.Policy.IdempotencyRetention)
	diff("policy.dead_letter_retention", cur.Policy.DeadLetterRetention, next.Policy.DeadLetterRetention)
	diff("log.level", cur.Log.Level, next.Log.Level)
	diff("log.format", cur.Log.Format, next.Log.Format)
	diff("log.collapse_interval", cur.Log.CollapseInterval, next.Log.CollapseInterval)
	cl, nl := cur.Limits, next.Limits
	diff("limits.read_header_timeout", cl.ReadHeaderTimeout, nl.ReadHeaderTimeout)
	diff("limits.idle_timeout", cl.IdleTimeout, nl.IdleTimeout)
	diff("limits.max_connections", cl.MaxConnections, nl.MaxConnections)
	diff("limits.admin_max_connections", cl.AdminMaxConnections, nl.AdminMaxConnections)
	diff("limits.max_header_bytes", cl.MaxHeaderBytes, nl.MaxHeaderBytes)
	diff("limits.max_inflight_bytes", cl.MaxInflightBytes, nl.MaxInflightBytes)
	diff("limits.overload_wait", cl.OverloadWait, nl.OverloadWait)
	for _, name := range cur.EndpointNames() {
		if ep, ok := next.Endpoint(name); ok {
			diff("endpoints."+name+".shards", cur.Endpoints[name].Shards, ep.Shards)
		}
	}
	diff("salesforce", cur.Salesforce, next.Salesforce)
	diff("tracing", cur.Tracing, next.Tracing)
	if cur.Salesforce != nil && !slices.Contains(keys, "salesforce") {
		diff("endpoints (names, owner, redact, completion_events: the Salesforce writer's view)",
			salesforceView(cur), salesforceView(next))
	}
	return keys
}

// restartOnlyBesides is restartOnly of the configuration a file with
// problems decoded to (config.LoadPartial; nil: none), leaving out every
// key that has a problem in err or lies under or above one (its value is
// the default standing in for it, not the file's).
func restartOnlyBesides(cur, partial *config.Config, err error) []string {
	if partial == nil {
		return nil
	}
	var bad []string
	for _, e := range config.Problems(err) {
		bad = append(bad, e.Key)
	}
	var keys []string
	for _, k := range restartOnly(cur, partial) {
		if !slices.ContainsFunc(bad, func(b string) bool {
			return b == k || strings.HasPrefix(b, k+".") || strings.HasPrefix(b, k+"[") || strings.HasPrefix(k, b+".")
		}) {
			keys = append(keys, k)
		}
	}
	return keys
}

// salesforceView is what the Salesforce writer was built with of cfg's
// endpoints (sfEndpoints): their names, owners, redaction rules, injected
// header names and completion events.
func salesforceView(cfg *config.Config) map[string]any {
	out := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Endpoints)) {
		ep := cfg.Endpoints[name]
		if ep == nil {
			continue
		}
		out[name] = []any{ep.Owner, ep.Redact, slices.Sorted(maps.Keys(ep.Headers)), ep.SigningHeaders(),
			ep.CompletionEvents}
	}
	return out
}

// reloadOnSignal calls Reload for every signal on hup (SIGHUP) until ctx
// ends, logging the outcome: "configuration reloaded" (by Reload) or
// "reload rejected" at error level with the reason.
func (a *App) reloadOnSignal(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if _, err := a.Reload(ctx); err != nil {
			a.logger.Error("reload rejected", slog.String("trigger", "SIGHUP"), slog.String("reason", err.Error()))
		}
	}
}
