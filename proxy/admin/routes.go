package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/calloutproxy/callout-proxy/proxy/admin/console"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
)

// routes lists every route of the admin listener (contract §9): /metrics
// without a token; under /admin/v1/ the endpoint routes (Deps.Endpoints),
// the dead-letter and callout routes (Deps.DeadLetters) and the replay-job
// routes (Deps.ReplayJobs), the reload route (Deps.Reload), each with a named bearer token: scope read for
// GETs (requireRead), write for changes (requireWrite, audit-logged); the
// ops console under /console/ over them; and, with Deps.Pprof, Go's
// profiler under /debug/pprof/ (pprof.go, scope write).
//
// Among the reads: the dead-letter search (search.go) and, with
// Deps.Stats, an endpoint's figures for the console's charts (stats.go).
func (s *server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.Guard)
	if s.d.Gatherer != nil {
		r.Handle("/metrics", promhttp.HandlerFor(s.d.Gatherer, promhttp.HandlerOpts{}))
	}
	if s.d.Pprof {
		s.pprofRoutes(r)
	}
	r.Route("/admin/v1", func(r chi.Router) {
		if s.d.Endpoints != nil {
			r.Get("/endpoints", s.requireRead(s.handleListEndpoints))
			r.Get("/endpoints/{name}", s.requireRead(s.handleGetEndpoint))
			r.Post("/endpoints/{name}/enable", s.handleEndpointAction(actionEnable, s.enableEndpoint))
			r.Post("/endpoints/{name}/disable", s.handleEndpointAction(actionDisable, s.disableEndpoint))
			r.Post("/endpoints/{name}/breaker/reset", s.handleEndpointAction(actionBreakerReset, s.resetBreaker))
		}
		if s.d.Stats != nil {
			r.Get("/endpoints/{name}/stats", s.requireRead(s.handleEndpointStats))
		}
		if s.d.DeadLetters != nil {
			r.Get("/dead-letters", s.requireRead(s.handleListDeadLetters))
			r.Get("/dead-letters/{id}", s.requireRead(s.handleGetDeadLetter))
			r.Post("/dead-letters/{id}/replay", s.writeOnID("replay", "dead_letter_id", s.handleReplayDeadLetter))
			r.Delete("/dead-letters/{id}", s.writeOnID("discard", "dead_letter_id", s.handleDiscardDeadLetter))
			r.Get("/callouts/{id}", s.requireRead(s.handleGetCallout))
			r.Get("/search", s.requireRead(s.handleSearch))
		}
		if s.d.Callouts != nil {
			r.Get("/callouts", s.requireRead(s.handleListCallouts))
		}
		if s.d.Keys != nil {
			r.Get("/idempotency-keys", s.requireRead(s.handleKeyHolders))
		}
		if s.d.Reload != nil {
			r.Post("/reload", s.handleReload)
		}
		if s.d.ReplayJobs != nil {
			r.Get("/replay-jobs", s.requireRead(s.handleListReplayJobs))
			r.Post("/replay-jobs", s.handleCreateReplayJob)
			r.Get("/replay-jobs/{id}", s.requireRead(s.handleGetReplayJob))
			r.Get("/replay-jobs/{id}/items", s.requireRead(s.handleReplayJobItems))
			r.Post("/replay-jobs/{id}/cancel", s.writeOnID("replay_job.cancel", "job_id", s.handleCancelReplayJob))
		}
	})
	// The ops console: pages over these same routes, the session's admin
	// token as their bearer (proxy/admin/console).
	r.Mount(console.Base, console.New(console.Deps{API: r, Tokens: s.d.Tokens, Throttle: s.throttle,
		Issuers: s.d.Config.Auth.Issuers, Logger: s.d.Logger, Now: s.d.Now, Sessions: s.d.ConsoleSessions}))
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	return r
}
