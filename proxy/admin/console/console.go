// Package console is the ops console: a small web UI for the
// people who run the proxy, served under /console/ on admin_listen only
// (proxy/admin mounts it; the callout listener never does). It shows the
// endpoints (gate, breaker, backlog, dead letters awaiting action) and each
// one's charts (attempts by class, dead letters, latency), the dead letters
// searched across endpoints, sorted, counted and bulk-selected, their
// detail, the replay jobs with their progress, and the
// callouts by id, Idempotency-Key or endpoint; a write-scope token also
// enables, disables and resets endpoints, replays or discards the dead
// letters selected, and runs filtered replays, a dry run first.
//
// The console holds no rule of its own: every page and action is a request
// to the admin API's own handler (Deps.API) with the session's admin token
// as its bearer, decoded into proxy/api's documents. So the API checks the
// token and its scope (contract §9), audit-logs every write with the
// token's name, redacts secrets (contract §7) and answers its problems; the
// console renders what it answered, with html/template escaping everything
// that came from a caller or an upstream.
//
// Auth: a login form takes an admin token and, when Deps.Tokens knows it,
// sets a session cookie (HttpOnly, SameSite=Strict, Secure over TLS, Path
// /console, Deps.SessionLifetime). Sessions live in this replica's memory
// (the admin port is reached per pod), at most Deps.MaxSessionsPerToken per
// token. Every POST needs the session's CSRF token and passes Go's
// http.CrossOriginProtection (Sec-Fetch-Site / Origin). Every answer
// carries a Content-Security-Policy without 'unsafe-inline' that allows
// nothing but this origin's own embedded script and style.
package console

import (
	"crypto/rand"
	"embed"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// Base is the path the console is mounted at on the admin listener.
const Base = "/console"

// Defaults of Deps.
const (
	// DefaultSessionLifetime is how long a session lasts after login,
	// whatever it does meanwhile (no sliding renewal).
	DefaultSessionLifetime = 30 * time.Minute
	// DefaultMaxSessionsPerToken bounds the live sessions of one admin
	// token; a login past it ends that token's oldest session.
	DefaultMaxSessionsPerToken = 8
)

// Tokens checks admin bearer tokens (contract §9); the admin API's Tokens
// (*auth.AdminTokens) is passed, so the console accepts exactly the API's
// tokens and scopes.
type Tokens interface {
	// Check returns the name of the token that the Authorization header
	// value carries when its scope includes need; else a *problem.Error:
	// 401 (no or unknown token) or 403 (scope read, write needed).
	Check(authorization string, need auth.Scope) (name string, err error)
}

// Deps are the console's dependencies.
type Deps struct {
	// API is the admin API's handler, serving /admin/v1/… (proxy/admin's
	// router). Every page and action of the console is a request to it.
	// Required.
	API http.Handler
	// Tokens checks the token typed into the login form. Required.
	Tokens Tokens
	// Throttle, optional, throttles failed logins per source address and
	// token prefix and collapses their audit lines (the admin API's own:
	// proxy/admin passes it). Nil: every failure is a 401 with its line.
	Throttle *auth.LoginThrottle
	// Issuers are the configured JWT issuers (auth.issuers): the
	// organisations an Idempotency-Key is looked up in.
	Issuers []string
	// Logger receives the audit lines of logins, logouts and refused
	// writes (msg "audit", as the API writes them). Default: discard.
	Logger *slog.Logger
	// Now is the clock: session expiry, "in 4m10s" and "3m ago". Default
	// time.Now.
	Now func() time.Time
	// Rand is the source of session ids and CSRF tokens. Default
	// crypto/rand.Reader.
	Rand io.Reader
	// SessionLifetime is a session's lifetime. Default
	// DefaultSessionLifetime. Unused with Sessions (NewSessions's).
	SessionLifetime time.Duration
	// MaxSessionsPerToken bounds each token's live sessions. Default
	// DefaultMaxSessionsPerToken. Unused with Sessions.
	MaxSessionsPerToken int
	// Sessions, optional, are the live sessions, shared with the consoles
	// built before this one (proxy/app passes one for the process, so that a
	// reload keeps them: Sessions). Nil: a set of this console's own, of
	// SessionLifetime and MaxSessionsPerToken.
	Sessions *Sessions
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// console is the console's handler state; it holds no package-level state.
type console struct {
	d     Deps
	pages *pages
	// counts are the endpoints' dead letters not replayed, reused briefly.
	counts counts
}

// New returns the console's handler, to be mounted at Base on the admin
// listener. It panics when Deps.API or Deps.Tokens is nil, or when the
// embedded templates do not parse: wiring mistakes, not conditions to
// serve with.
func New(d Deps) http.Handler {
	if d.API == nil || d.Tokens == nil {
		panic("console.New: Deps.API and Deps.Tokens are required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Rand == nil {
		d.Rand = rand.Reader
	}
	if d.Sessions == nil {
		d.Sessions = NewSessions(d.SessionLifetime, d.MaxSessionsPerToken)
	}
	c := &console{d: d, pages: mustParsePages()}
	return c.routes()
}

// routes lists every route of the console, relative to Base. Reads need a
// session of any scope; every POST but the login needs a session and its
// CSRF token (requireSession). Whether a session's token may write is the
// API's decision: a read-scope session that posts gets the API's 403.
func (c *console) routes() http.Handler {
	r := chi.NewRouter()
	static, _ := fs.Sub(staticFS, "static")
	r.Handle("/static/*", http.StripPrefix(Base+"/static/", staticHandler(static)))
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Base+"/endpoints", http.StatusSeeOther)
	})
	r.Get("/login", c.handleLoginForm)
	r.Post("/login", c.handleLogin)
	r.Post("/logout", c.requireSession(c.handleLogout))

	r.Get("/endpoints", c.requireSession(c.handleEndpoints))
	r.Get("/endpoints/{name}", c.requireSession(c.handleEndpoint))
	r.Get("/endpoints/{name}/{action}", c.requireSession(c.handleEndpointConfirm))
	r.Post("/endpoints/{name}/{action}", c.requireSession(c.handleEndpointAction))

	r.Get("/dead-letters", c.requireSession(c.handleDeadLetters))
	r.Get("/dead-letters/{id}", c.requireSession(c.handleDeadLetter))
	r.Post("/dead-letters/{id}/replay", c.requireSession(c.handleReplayOne))
	r.Post("/dead-letters/bulk", c.requireSession(c.handleBulk))

	r.Get("/replay", c.requireSession(c.handleReplayForm))
	r.Get("/replay-jobs", c.requireSession(c.handleReplayJobs))
	r.Post("/replay-jobs", c.requireSession(c.handleCreateDryRun))
	r.Get("/replay-jobs/{id}", c.requireSession(c.handleReplayJob))
	r.Post("/replay-jobs/{id}/run", c.requireSession(c.handleRunDryRun))
	r.Post("/replay-jobs/{id}/cancel", c.requireSession(c.handleCancelJob))

	r.Get("/callouts", c.requireSession(c.handleCallouts))
	r.Get("/callouts/{id}", c.requireSession(c.handleCallout))

	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, http.StatusNotFound, "Not found", "The console has no page at this address.")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, http.StatusMethodNotAllowed, "Method not allowed", "This page does not take "+r.Method+".")
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.d.Logger.LogAttrs(r.Context(), slog.LevelWarn, "audit", slog.String("token", c.tokenName(r)),
			slog.String("action", "console.post"), slog.String("result", "cross_origin"),
			slog.String("path", r.URL.Path), slog.String("remote_addr", r.RemoteAddr))
		c.renderError(w, r, nil, http.StatusForbidden, "Cross-origin request refused",
			"This form was posted from another site; the console only takes forms from its own pages.")
	}))
	return securityHeaders(cop.Handler(r))
}

// contentSecurityPolicy lets a console page load only the console's own
// script, style and images, post forms and fetch only to its own origin,
// and never be framed; no inline script or style ('unsafe-inline') at all.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every console answer carries: the
// Content-Security-Policy, no MIME sniffing, no referrer (ids in console
// URLs stay on this host), no framing, and no caching of pages (static
// assets set their own Cache-Control).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// staticHandler serves the embedded script and style sheet, revalidated on
// every use (they change with the binary).
func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || r.URL.Path[len(r.URL.Path)-1] == '/' {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
