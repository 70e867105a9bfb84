// Package admin is the admin API on the admin listener (contract §9):
// endpoints (state, enable, disable, breaker reset), dead letters (list,
// show, replay, discard), any organisation's callouts, and replay jobs,
// under /admin/v1/ with named bearer tokens scoped read or write, every
// write action audit-logged with the token's name; and /metrics without a
// token. New builds it from explicit dependencies; routes.go lists every
// route. Its documents are proxy/api's, which calloutctl decodes.
package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/admin/console"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/calloutproxy/callout-proxy/proxy/statusdoc"
)

// Tokens checks admin bearer tokens (contract §9). *auth.AdminTokens
// implements it.
type Tokens interface {
	// Check returns the name of the token the Authorization header value
	// carries when its scope includes need; else a 401 (no or unknown
	// token) or 403 (scope read, write needed) *problem.Error.
	Check(authorization string, need auth.Scope) (name string, err error)
}

// EndpointStore is what the endpoint routes need of the callout store
// (contract §6, §9). *redisstore.Store implements it.
type EndpointStore interface {
	// EndpointState reads an endpoint's breaker, pause, disable flag and
	// queue sizes in one pipelined round trip. Errors:
	// policy.ErrUnavailable.
	EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error)
	// Enable re-enables an endpoint with a fresh breaker, failure count,
	// pause and outage. Errors: policy.ErrUnavailable.
	Enable(ctx context.Context, endpoint string) error
	// Disable disables an endpoint (reason and time written once) and
	// turns its pending callouts into dead letters, reason
	// endpoint_disabled; the ids are returned even with an error. Errors:
	// policy.ErrUnavailable.
	Disable(ctx context.Context, endpoint, reason string) (policy.DisableResult, error)
	// ResetBreaker closes the breaker and lifts a pause; the disable flag
	// and the outage stay. Errors: policy.ErrUnavailable.
	ResetBreaker(ctx context.Context, endpoint string) error
}

// DeadLetters is what the dead-letter and callout routes need (contract §7,
// §8). *replay.Service implements it; its methods document their errors
// (policy.Err*, replay.Err*), which problem.From answers.
type DeadLetters interface {
	// DeadLetters lists one page of dead letters matching q.
	DeadLetters(ctx context.Context, q replay.Query) (replay.Page, error)
	// DeadLetter reads dead letter id and its replay mark.
	DeadLetter(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error)
	// Callout reads callout id, whatever its state, and its replay mark.
	Callout(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error)
	// Replay replays dead letter id on behalf of token by, as part of job
	// jobID ("" when alone), and audit-logs it.
	Replay(ctx context.Context, id, by, jobID string) (replay.Result, error)
	// Discard deletes dead letter id.
	Discard(ctx context.Context, id string) error
}

// ReplayJobs is what the replay-job routes need (contract §8).
// *replay.Service implements it; its methods document their errors.
type ReplayJobs interface {
	// CreateJob records a replay job of sp made by token by.
	CreateJob(ctx context.Context, sp replay.Spec, by string) (policy.ReplayJob, error)
	// Job reads replay job id.
	Job(ctx context.Context, id string) (policy.ReplayJob, error)
	// Jobs lists up to limit replay jobs, newest first.
	Jobs(ctx context.Context, limit int) ([]policy.ReplayJob, error)
	// JobItems returns up to limit items of job id from offset on.
	JobItems(ctx context.Context, id string, offset, limit int) (replay.ItemPage, error)
	// CancelJob asks job id to stop on behalf of token by.
	CancelJob(ctx context.Context, id, by string) (policy.ReplayJob, error)
}

// Events is told of the callouts an admin disable turned into dead letters
// (as the breaker watcher is of an auto-disable's); the Salesforce writer
// implements it and must not block.
type Events interface {
	Finished(ctx context.Context, f policy.Finished)
}

// Deps are the admin listener's dependencies, every one explicit. A route
// group whose dependency is nil is not mounted: its paths answer 404.
type Deps struct {
	// Config is the configuration in force: the endpoints reported and
	// acted on, their redaction rules, the policy's disable_after.
	// Required.
	Config *config.Config
	// Tokens checks the named bearer tokens. Required.
	Tokens Tokens
	// Endpoints serves /admin/v1/endpoints…; Metrics is then required.
	Endpoints EndpointStore
	// DeadLetters serves /admin/v1/dead-letters… and /admin/v1/callouts/{id}.
	DeadLetters DeadLetters
	// ReplayJobs serves /admin/v1/replay-jobs….
	ReplayJobs ReplayJobs
	// Callouts, optional, serves GET /admin/v1/callouts (the pending list).
	Callouts Callouts
	// Keys, optional, serves GET /admin/v1/idempotency-keys.
	Keys Keys
	// Stats, optional, serves GET /admin/v1/endpoints/{name}/stats (the
	// console's charts) and counts the dead letters an admin disable made.
	Stats Stats
	// Events, optional, is told of the dead letters an admin disable made.
	Events Events
	// Metrics counts the breaker transitions (callout_breaker_transitions_total)
	// and dead letters (callout_dead_letters_total) admin actions cause.
	Metrics *metrics.Metrics
	// Gatherer, optional, serves /metrics, with no token (contract §9).
	Gatherer prometheus.Gatherer
	// Pprof mounts Go's profiler under /debug/pprof/, behind a
	// write-scope token (config admin.pprof; pprof.go). Off by default.
	Pprof bool
	// Wake, optional, starts this replica's dispatcher at once after an
	// enable or breaker reset, which may release held callouts.
	Wake func()
	// Logger receives the audit lines (msg "audit"), the login throttle's
	// collapsed ones included. Default: discard — the composition root
	// always passes one.
	Logger *slog.Logger
	// Now is the clock (a pause in force, a breaker's reset, the login
	// throttle's windows); default time.Now.
	Now func() time.Time
	// Reload, optional, serves POST /admin/v1/reload (reload.go): it puts
	// the configuration file's current text in force and returns its
	// fingerprint (config.Fingerprint), or returns why not with nothing
	// changed (app.App.Reload).
	Reload func(ctx context.Context) (fingerprint string, err error)
	// ConsoleSessions, optional, are the ops console's live sessions, kept
	// across the admin handlers a process builds (proxy/app passes one, so a
	// reload ends only the sessions whose token it removed or changed:
	// console.Sessions). Nil: the console keeps its own.
	ConsoleSessions *console.Sessions
}

// server is the admin API over its dependencies.
type server struct {
	d          Deps
	redactions statusdoc.Redactions
	throttle   *auth.LoginThrottle // the API's and the console's
}

// New returns the admin listener's handler over d (routes.go lists its
// routes). Failed token checks of the API and the console share one login
// throttle (auth.LoginThrottle, limits.admin_login_*: docs/limits.md). It panics when Config or Tokens is nil, or Endpoints is set
// without Metrics: a wiring mistake, not a condition to serve with.
func New(d Deps) http.Handler {
	switch {
	case d.Config == nil || d.Tokens == nil:
		panic("admin.New: Deps.Config and Deps.Tokens are required")
	case d.Endpoints != nil && d.Metrics == nil:
		panic("admin.New: Deps.Metrics is required with Deps.Endpoints")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &server{d: d, redactions: statusdoc.NewRedactions(d.Config), throttle: loginThrottle(d)}
	return s.routes()
}

// loginThrottle is the throttle of failed admin-token checks of the API
// and the console, from limits.admin_login_* (a configuration that did not
// go through config.Parse gets their defaults).
func loginThrottle(d Deps) *auth.LoginThrottle {
	lim := d.Config.Limits
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	window := lim.AdminLoginWindow
	if window <= 0 {
		window = config.DefaultAdminLoginWindow
	}
	t := auth.NewLoginThrottle(or(lim.AdminLoginFailures, config.DefaultAdminLoginFailures), window,
		or(lim.AdminLoginSources, config.DefaultAdminLoginSources), d.Now, d.Logger)
	if d.Metrics != nil {
		t.Observe(func(throttled bool) {
			result := "unauthorized"
			if throttled {
				result = "throttled"
			}
			d.Metrics.LoginFailures.WithLabelValues(result).Inc()
		})
	}
	return t
}

// storeTimeout bounds one store operation of an admin write (replay,
// discard, job create and cancel) that must not hang on a hung Redis.
const storeTimeout = 2 * time.Second

// storeContext is the context of an admin write's store operation: r's
// values without its cancellation (a write whose caller went away still
// ends as one), for at most storeTimeout.
func storeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
}

// timeOrNil is t in UTC, or nil when t is zero (left out of the JSON).
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
