package main

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

	"github.com/calloutproxy/callout-proxy/proxy"
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
// make room at the cap).
func listenerCollectors(name string, l *limit.Listener) []prometheus.Collector {
	labels := prometheus.Labels{"listener": name}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "callout_listener_connections",
			Help: "Open connections of the listener.", ConstLabels: labels},
			func() float64 { return float64(l.Open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "callout_listener_evictions_total",
			Help: "Idle connections closed to make room at limits.max_connections.", ConstLabels: labels},
			func() float64 { return float64(l.Evicted()) }),
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

// listenAndServe runs both listeners until ctx ends, then drains: srv on
// listen, adminAPI on admin_listen. Each has
// its own connection cap (limits.max_connections, admin_max_connections),
// so a flood on the callout listener never starves the admin listener.
// The "listening" line carries startup too (where Redis is, the build).
func listenAndServe(ctx context.Context, cfg *config.Config, srv *proxy.Server, adminAPI http.Handler,
	reg prometheus.Registerer, logger *slog.Logger, startup ...slog.Attr) error {
	rawMain, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	rawAdmin, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		rawMain.Close()
		return fmt.Errorf("admin_listen: %w", err)
	}
	capMain := limit.NewListener(rawMain, cfg.Limits.MaxConnections)
	capAdmin := limit.NewListener(rawAdmin, cfg.Limits.AdminMaxConnections)
	for _, c := range append(listenerCollectors("callout", capMain), listenerCollectors("admin", capAdmin)...) {
		if err := reg.Register(c); err != nil {
			rawMain.Close()
			rawAdmin.Close()
			return err
		}
	}
	var main net.Listener = capMain
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			rawMain.Close()
			rawAdmin.Close()
			return usageError{fmt.Errorf("tls_cert_file/tls_key_file: %w", err)}
		}
		main = tls.NewListener(capMain, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	hs := newServer(srv.Handler(), capMain, cfg.Limits, logger)
	// DisableGeneralOptionsHandler: "OPTIONS *" reaches the proxy's own
	// checks (400 absolute-form, problem+json) instead of net/http's bare 200.
	hs.DisableGeneralOptionsHandler = true
	// The callout listener's handler applies its own limits (routes.go);
	// the admin listener gets the connection-level ones here.
	admin := limit.CloseAfterTransferEncoding(limit.BodyDeadline(cfg.Limits.BodyReadTimeout,
		limit.WriteDeadline(cfg.Limits.WriteTimeout, adminAPI)))
	as := newServer(admin, capAdmin, cfg.Limits, logger)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(main) }()
	go func() { errc <- as.Serve(capAdmin) }()
	logger.LogAttrs(ctx, slog.LevelInfo, "listening", append([]slog.Attr{slog.String("listen", rawMain.Addr().String()),
		slog.String("admin_listen", rawAdmin.Addr().String()), slog.Bool("tls", cfg.TLSCertFile != "")}, startup...)...)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	srv.Drain()
	grace := drainGrace(cfg)
	logger.Info("draining", slog.Duration("grace", grace))
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err = errors.Join(hs.Shutdown(sctx), as.Shutdown(sctx))
	logger.Info("listeners closed")
	return err
}
