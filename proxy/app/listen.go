package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
)

// runtimeHeadroom is what the Go runtime's soft memory limit adds to the
// memory budget: the runtime, goroutines, connection buffers, caches.
const runtimeHeadroom = 96 << 20

// memoryBudget builds the memory budget of limits.max_inflight_bytes,
// registers its metrics, and — unless GOMEMLIMIT is set — gives the Go
// runtime a soft memory limit of the budget plus 96 MiB, so the garbage
// collector returns the buffers of finished requests before the heap grows
// to twice what is live (GOGC's default) and the pod stays under its
// memory limit (contract §10: "never an OOM kill").
func memoryBudget(lim config.Limits, getenv func(string) string, reg prometheus.Registerer,
	logger *slog.Logger) (*limit.Budget, error) {
	b := limit.NewBudget(lim.MaxInflightBytes, lim.OverloadWait, lim.MaxInflightBytesPerIssuer)
	for _, c := range b.Collectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if getenv("GOMEMLIMIT") == "" {
		soft := lim.MaxInflightBytes + runtimeHeadroom
		debug.SetMemoryLimit(soft)
		logger.Info("memory budget", slog.Int64("max_inflight_bytes", lim.MaxInflightBytes),
			slog.Int64("go_memory_limit", soft))
	}
	return b, nil
}

// listenerCollectors are the metrics of a capped listener:
// callout_listener_connections{listener} (open now) and
// callout_listener_evictions_total{listener} (idle connections closed to
// make room at the cap) and callout_listener_share_cuts_total{listener}
// (requests cut for their organisation's share).
func listenerCollectors(name string, l *limit.Listener) []prometheus.Collector {
	labels := prometheus.Labels{"listener": name}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "callout_listener_connections",
			Help: "Open connections of the listener.", ConstLabels: labels},
			func() float64 { return float64(l.Open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callout_listener_evictions_total",
			Help: "Connections closed to make room at limits.max_connections (idle ones, and requests cut for a share).", ConstLabels: labels},
			func() float64 { return float64(l.Evicted()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callout_listener_share_cuts_total",
			Help: "Requests cut (503 overloaded, connection closed) to make room at limits.max_connections because " +
				"their organisation ran more than limits.max_connections_per_issuer; counted in " +
				"callout_listener_evictions_total too.", ConstLabels: labels},
			func() float64 { return float64(l.Cut()) }),
	}
}

// newServer is an http.Server for one listener with the limits of
// config.Limits (contract §10): ReadHeaderTimeout, IdleTimeout, the body
// deadline (in the handler, see limit.BodyDeadline: http.Server's
// ReadTimeout would also cut requests whose handler outlives it), and a
// header ceiling of twice max_header_bytes above which net/http refuses a
// request itself (the proxy's 431 problem below it, proxy.limitHeaders).
// The capped listener l marks the connections running a request.
func newServer(h http.Handler, l *limit.Listener, lim config.Limits, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           l.Handler(h),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    2 * lim.MaxHeaderBytes,
		ConnState:         l.ConnState,
		ConnContext:       l.ConnContext,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// listen opens both listeners (or takes Options.Listener and
// AdminListener), each with its own connection cap
// (limits.max_connections, admin_max_connections), so a flood on the
// callout listener never starves the admin listener, and registers their
// metrics. Errors: a ConfigError naming the key whose address cannot be
// listened on ("listen 127.0.0.1:8080: ... address already in use") or
// whose TLS pair does not load.
func (a *App) listen() error {
	cfg := a.cfg.Load()
	open := func(given net.Listener, key, addr string) (net.Listener, error) {
		if given != nil {
			return given, nil
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, ConfigError{fmt.Errorf("%s %s: %w (another process holds the port? pick another "+
				"address or stop it)", key, addr, err)}
		}
		return l, nil
	}
	rawMain, err := open(a.o.Listener, "listen", cfg.Listen)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, func() { rawMain.Close() })
	rawAdmin, err := open(a.o.AdminListener, "admin_listen", cfg.AdminListen)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, func() { rawAdmin.Close() })
	a.listenAddr, a.adminListenAddr = rawMain.Addr().String(), rawAdmin.Addr().String()
	a.main = limit.NewListener(rawMain, cfg.Limits.MaxConnections)
	a.main.SetShare(cfg.Limits.MaxConnectionsPerIssuer) // the admin listener's callers have no organisation
	a.admin = limit.NewListener(rawAdmin, cfg.Limits.AdminMaxConnections)
	for _, c := range append(listenerCollectors("callout", a.main), listenerCollectors("admin", a.admin)...) {
		if err := a.reg.Register(c); err != nil {
			return err
		}
	}
	a.mainL = a.main
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return ConfigError{fmt.Errorf("tls_cert_file/tls_key_file: %w", err)}
		}
		a.mainL = tls.NewListener(a.main, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	return nil
}

// serve runs both listeners until ctx ends, then drains: the callout
// listener serves the generation in force's callout handler, the admin
// listener its admin API. The "listening" line carries startup too (where
// Redis is, the build).
func (a *App) serve(ctx context.Context, startup ...slog.Attr) error {
	cfg := a.cfg.Load()
	hs := newServer(handlerOf(func() http.Handler { return a.cur.Load().callout }), a.main, cfg.Limits, a.logger)
	// DisableGeneralOptionsHandler: "OPTIONS *" reaches the proxy's own
	// checks (400 absolute-form, problem+json) instead of net/http's bare 200.
	hs.DisableGeneralOptionsHandler = true
	as := newServer(handlerOf(func() http.Handler { return a.cur.Load().admin }), a.admin, cfg.Limits, a.logger)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(a.mainL) }()
	go func() { errc <- as.Serve(a.admin) }()
	a.logger.LogAttrs(ctx, slog.LevelInfo, "listening", append([]slog.Attr{slog.String("listen", a.listenAddr),
		slog.String("admin_listen", a.adminListenAddr), slog.Bool("tls", cfg.TLSCertFile != ""),
		slog.String("config", cfg.Fingerprint)}, startup...)...)

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	a.cur.Load().srv.Drain()
	grace := DrainGrace(a.cfg.Load())
	a.logger.Info("draining", slog.Duration("grace", grace))
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err = errors.Join(err, hs.Shutdown(sctx), as.Shutdown(sctx))
	a.logger.Info("listeners closed")
	return err
}
