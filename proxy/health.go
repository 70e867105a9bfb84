package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// Healthz is the body of GET /healthz: "ok", the build that answers
// (`callout-proxy healthcheck` prints it; an operator sees which version a
// replica runs without the admin listener) and Config, the fingerprint of
// the configuration in force (config.Fingerprint; empty for one built in
// code), which `healthcheck --config FILE` compares with FILE's.
type Healthz struct {
	Status string `json:"status"`
	Config string `json:"config,omitempty"`
	api.BuildInfo
}

// handleHealthz answers 200 while the process serves HTTP (liveness).
func (s *Server) handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, Healthz{Status: "ok", Config: s.d.Config.Fingerprint, BuildInfo: s.d.Build})
	}
}

// notAdminListener answers an admin API or /metrics path asked of the
// callout listener: 404 not-admin-listener, so a client pointed at the
// wrong port (calloutctl --server) can say so instead of "no such route".
func notAdminListener(w http.ResponseWriter, _ *http.Request) {
	problem.Write(w, problem.Errorf(problem.NotAdminListener,
		"this is the callout listener (listen), not admin_listen: the admin API (/admin/v1/) and /metrics are served on admin_listen"))
}

// handleReadyz answers 200 when started and not draining, 503 while
// draining. It reports Redis reachability in its body but never fails on it:
// a Redis outage must not take every replica out of the load balancer at
// once (contract §9), since reads without a key still pass through.
func (s *Server) handleReadyz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		redis := "ok"
		if err := s.pingStore(r.Context()); err != nil {
			redis = "unreachable"
		}
		body := map[string]string{"status": "ready", "redis": redis}
		status := http.StatusOK
		if s.draining.Load() {
			body["status"], status = "draining", http.StatusServiceUnavailable
		}
		httpx.WriteJSON(w, status, body)
	}
}

// storeCheckTimeout bounds a readiness check of Redis, so a hung Redis
// cannot make /readyz slower than a probe's timeout.
const storeCheckTimeout = time.Second

// pingStore asks Redis for a PONG within storeCheckTimeout.
func (s *Server) pingStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	return s.d.Store.Ping(ctx)
}
