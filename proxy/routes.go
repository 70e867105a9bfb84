package proxy

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
)

// routes lists every route of the callout listener (contract §4, §9); the
// admin listener's are in proxy/admin/routes.go. Before routing: the
// method and target checks, closing after a Transfer-Encoding request (RFC
// 9112 §6.3), the header limits (431) and the body read and response write
// deadlines.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.Guard, limit.CloseAfterTransferEncoding, limit.CloseIfBodyUnread, s.limitHeaders, s.bodyDeadline)
	// HEAD answers as GET without the body (RFC 9110 §9.3.2; net/http
	// drops what the handler writes): probes that check with HEAD.
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r.Method(m, "/healthz", s.handleHealthz())
		r.Method(m, "/readyz", s.handleReadyz())
	}
	r.Handle("/callout/*", s.handleCallout())
	r.Get("/v1/callouts/{id}", s.handleGetCallout())
	r.Get("/v1/policy", s.handleGetPolicy())
	r.Handle("/admin/*", http.HandlerFunc(notAdminListener))
	r.Handle("/metrics", http.HandlerFunc(notAdminListener))
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	return r
}
