package admin

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// maxProfileSeconds bounds the seconds parameter of a CPU profile or an
// execution trace, so one request cannot hold a handler for hours.
const maxProfileSeconds = 300

// pprofRoutes mounts Go's profiler (net/http/pprof) under /debug/pprof/
// when Deps.Pprof is set (config admin.pprof, off by default;
// §6): the index, every named profile (/debug/pprof/heap, goroutine,
// allocs, block, mutex, threadcreate), cmdline, symbol, the CPU profile
// (/debug/pprof/profile?seconds=N, default 30) and the execution trace
// (/debug/pprof/trace?seconds=N). A profile shows code paths, goroutine
// stacks and memory, and costs CPU while it runs, so every request needs a
// token of scope write and is audit-logged (action "pprof", its path),
// refusals included; seconds over maxProfileSeconds are refused (400).
func (s *server) pprofRoutes(r chi.Router) {
	r.Get("/debug/pprof/", s.requirePprof(pprof.Index))
	r.Get("/debug/pprof/cmdline", s.requirePprof(pprof.Cmdline))
	r.Get("/debug/pprof/profile", s.requirePprof(pprof.Profile))
	r.Get("/debug/pprof/symbol", s.requirePprof(pprof.Symbol))
	r.Post("/debug/pprof/symbol", s.requirePprof(pprof.Symbol))
	r.Get("/debug/pprof/trace", s.requirePprof(pprof.Trace))
	r.Get("/debug/pprof/{profile}", s.requirePprof(pprof.Index)) // Index serves the named profiles
}

// requirePprof wraps a profiler handler: a write-scope token (requireWrite
// audit-logs a refusal), a bounded seconds parameter, an audit line.
func (s *server) requirePprof(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		au, ok := s.requireWrite(w, r, "pprof", "path", r.URL.Path)
		if !ok {
			return
		}
		if v := r.URL.Query().Get("seconds"); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n <= 0 || n > maxProfileSeconds {
				au.refused(w, problem.Errorf(problem.InvalidRequest, "seconds must be a whole number from 1 to "+
					strconv.Itoa(maxProfileSeconds)), slog.String("path", r.URL.Path))
				return
			}
		}
		au.log(slog.LevelInfo, "ok", slog.String("path", r.URL.Path), slog.String("query", r.URL.RawQuery))
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	}
}
