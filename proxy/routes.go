package proxy

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/httpx"
)

// routes lists every route of the callout listener (SPEC §4, §9); the
// admin listener's are in proxy/admin/routes.go.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.Guard)
	r.Get("/healthz", s.handleHealthz())
	r.Get("/readyz", s.handleReadyz())
	r.Handle("/callout/*", s.handleCallout())
	r.Get("/v1/callouts/{id}", s.handleGetCallout())
	r.Get("/v1/policy", s.handleGetPolicy())
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	return r
}
