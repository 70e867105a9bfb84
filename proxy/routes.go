package proxy

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// routes lists every route of the callout listener.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(rejectUnroutable)
	r.Get("/healthz", s.handleHealthz())
	r.Get("/readyz", s.handleReadyz())
	r.Handle("/callout/*", s.handleCallout())
	r.Get("/v1/callouts/{id}", s.handleGetCallout())
	r.Get("/v1/policy", s.handleGetPolicy())
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		problem.Write(w, problem.Errorf(problem.NotFound, "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		problem.Write(w, problem.Errorf(problem.MethodNotAllowed, "method not allowed on this route"))
	})
	return r
}

// adminRoutes lists every route of the admin listener (SPEC §9): /metrics
// without a token; under /admin/v1/ the endpoint routes (admin.go, when
// Deps.AdminStore is set) and the dead-letter, callout and replay-job
// routes (admin_deadletters.go, when Deps.DeadLetters is set), each with a
// named bearer token: scope read for GETs, write for changes.
func (s *Server) adminRoutes() http.Handler {
	r := chi.NewRouter()
	r.Use(rejectUnroutable)
	if s.d.Gatherer != nil {
		r.Handle("/metrics", promhttp.HandlerFor(s.d.Gatherer, promhttp.HandlerOpts{}))
	}
	r.Route("/admin/v1", func(r chi.Router) {
		if s.d.AdminStore != nil {
			r.Get("/endpoints", s.handleListEndpoints())
			r.Get("/endpoints/{name}", s.handleGetEndpoint())
			r.Post("/endpoints/{name}/enable", s.handleEndpointAction(actionEnable, s.enableEndpoint))
			r.Post("/endpoints/{name}/disable", s.handleEndpointAction(actionDisable, s.disableEndpoint))
			r.Post("/endpoints/{name}/breaker/reset", s.handleEndpointAction(actionBreakerReset, s.resetBreaker))
		}
		s.mountDeadLetterRoutes(r)
	})
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		problem.Write(w, problem.Errorf(problem.NotFound, "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		problem.Write(w, problem.Errorf(problem.MethodNotAllowed, "method not allowed on this route"))
	})
	return r
}

// allowedMethods are the methods of SPEC §4's request-flow table, the only
// ones the proxy serves: reads, then writes.
const allowedMethods = "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE"

// isAllowedMethod reports whether method is one of allowedMethods. Methods
// are case-sensitive (RFC 9110 §9.1): "trace" or "TRACK" is not served.
func isAllowedMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// rejectUnroutable refuses TRACE, CONNECT and every method outside
// allowedMethods (405 with Allow, RFC 9110 §15.5.6) and absolute-form or
// authority-form request targets (400) before any routing (SPEC §4).
func rejectUnroutable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !isAllowedMethod(r.Method):
			w.Header().Set("Allow", allowedMethods)
			problem.Write(w, problem.Errorf(problem.MethodNotAllowed, r.Method+" is never forwarded"))
		case !strings.HasPrefix(r.RequestURI, "/"):
			problem.Write(w, problem.Errorf(problem.AbsoluteForm,
				"the request target must be origin-form (a path), not absolute-form"))
		default:
			next.ServeHTTP(w, r)
		}
	})
}
