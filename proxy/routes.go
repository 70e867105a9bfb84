package proxy

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
)

// routes lists every route of the callout listener (contract §4, §9); the
// admin listener's are in proxy/admin/routes.go. Before routing: the
// method and target checks, closing after a Transfer-Encoding request (RFC
// 9112 §6.3), the header limits (431) and the body read and response write
// deadlines.
//
// A callout (/callout/…, nearly every request) is served before the
// router, through the same middleware list composed once in the same
// order, so it skips only the router's own per-request work (its route
// context, its context value, the path values: 3 allocations); every
// other path goes through the router. calloutFirst matches exactly the
// paths the router sends to /callout/*.
func (s *Server) routes() http.Handler {
	mw := []func(http.Handler) http.Handler{httpx.Guard, limit.CloseAfterTransferEncoding, limit.CloseIfBodyUnread,
		s.limitHeaders, s.bodyDeadline}
	callout := s.handleCallout()
	r := chi.NewRouter()
	r.Use(mw...)
	// HEAD answers as GET without the body (RFC 9110 §9.3.2; net/http
	// drops what the handler writes): probes that check with HEAD.
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r.Method(m, "/healthz", s.handleHealthz())
		r.Method(m, "/readyz", s.handleReadyz())
	}
	r.Handle(calloutPrefix+"*", callout)
	r.Get("/v1/callouts/{id}", s.handleGetCallout())
	r.Get("/v1/policy", s.handleGetPolicy())
	r.Handle("/admin/*", http.HandlerFunc(notAdminListener))
	r.Handle("/metrics", http.HandlerFunc(notAdminListener))
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	return calloutFirst{Mux: r, callout: chi.Chain(mw...).Handler(callout)}
}

// calloutFirst serves a callout path with callout (the listener's
// middleware and handleCallout) and every other request with the router.
// It is a chi.Routes still (the embedded router's), so the route list can
// be walked.
type calloutFirst struct {
	*chi.Mux
	callout http.Handler
}

// ServeHTTP routes as the router would for /callout/*: chi matches the
// escaped path (RawPath when set, else Path) against the prefix. The
// callout gets a shallow copy of r, as the router's handlers do: the
// middleware replaces r.Body (CloseIfBodyUnread, BodyDeadline), and that
// must not reach net/http's own request, whose Body's type its server
// reads after the handler (whether to discard an unread body or close the
// connection, a 100-continue never sent): given the wrapper, it would try
// to read the rest of a refused body instead of closing at once.
func (c calloutFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.RawPath
	if p == "" {
		p = r.URL.Path
	}
	if strings.HasPrefix(p, calloutPrefix) {
		own := new(http.Request)
		*own = *r
		c.callout.ServeHTTP(w, own)
		return
	}
	c.Mux.ServeHTTP(w, r)
}
