package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// AdminStore is what the admin API's endpoint routes need of the store
// (SPEC §6, §9). *redisstore.Store implements it.
type AdminStore interface {
	// EndpointState reads an endpoint's breaker, pause, disable flag and
	// queue sizes in one pipelined round trip. Errors: ErrUnavailable.
	EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error)
	// Enable re-enables an endpoint with a fresh breaker, failure count,
	// pause and outage. Errors: ErrUnavailable.
	Enable(ctx context.Context, endpoint string) error
	// Disable disables an endpoint (reason and time written once) and turns
	// its pending callouts into dead letters, reason endpoint_disabled; the
	// ids are returned even with an error. Errors: ErrUnavailable.
	Disable(ctx context.Context, endpoint, reason string) (policy.DisableResult, error)
	// ResetBreaker closes the breaker and lifts a pause; the disable flag
	// and the outage stay. Errors: ErrUnavailable.
	ResetBreaker(ctx context.Context, endpoint string) error
}

// EndpointDoc is one endpoint of GET /admin/v1/endpoints and
// GET /admin/v1/endpoints/{name} (SPEC §6, §9): its shared state in Redis
// as read at one moment, and its effective breaker settings. Times are RFC
// 3339 in UTC with millisecond precision and are left out when not set;
// durations are Go duration strings.
type EndpointDoc struct {
	Name string `json:"name"`
	// Gate is what a request meets now: open, half_open (the next request
	// or held callout is the probe), probing (a probe is out until
	// probe_out_until), breaker_open, paused or disabled.
	Gate string `json:"gate"`
	// Breaker is the circuit breaker's state: closed, open or half_open.
	Breaker string `json:"breaker"`
	// ConsecutiveFailures counts retryable failures since the last success
	// (429 and permanent answers never count, and do not reset it).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// OpenedAt is when the breaker opened (written once, by the opener);
	// NextProbeAt when the open breaker lets its single probe through.
	OpenedAt      *time.Time `json:"opened_at,omitempty"`
	NextProbeAt   *time.Time `json:"next_probe_at,omitempty"`
	ProbeOutUntil *time.Time `json:"probe_out_until,omitempty"`
	// LastSuccessAt is the success that last ended a failure streak;
	// OutageStartedAt the first counting failure after a success, from
	// which disable_after is measured.
	LastSuccessAt   *time.Time `json:"last_success_at,omitempty"`
	OutageStartedAt *time.Time `json:"outage_started_at,omitempty"`
	// PausedUntil is the end of a 429 Retry-After pause still in force.
	PausedUntil    *time.Time `json:"paused_until,omitempty"`
	Disabled       bool       `json:"disabled"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	// BacklogItems counts pending callouts (scheduled, held and in flight),
	// BacklogBytes their request bodies; InFlight the leased ones.
	BacklogItems int64 `json:"backlog_items"`
	BacklogBytes int64 `json:"backlog_bytes"`
	InFlight     int64 `json:"in_flight"`
	// DeadLetters counts the endpoint's dead letters still kept.
	DeadLetters int64 `json:"dead_letters"`
	// The effective settings (endpoint overrides, else the policy's).
	BreakerFailures      int    `json:"breaker_failures"`
	BreakerProbeInterval string `json:"breaker_probe_interval"`
	DisableAfter         string `json:"disable_after"`
}

// EndpointList is the body of GET /admin/v1/endpoints: every configured
// endpoint, by name in ascending byte order.
type EndpointList struct {
	Endpoints []EndpointDoc `json:"endpoints"`
}

// EndpointActionResult is the body of a successful POST
// /admin/v1/endpoints/{name}/enable, /disable or /breaker/reset.
type EndpointActionResult struct {
	// Action is enable, disable or breaker_reset.
	Action string `json:"action"`
	// Changed is false when the action found nothing to do (enabling an
	// enabled endpoint, disabling a disabled one, resetting a closed
	// breaker with no failures and no pause).
	Changed bool `json:"changed"`
	// DeadLettered lists the callouts that disabling turned into dead
	// letters (reason endpoint_disabled).
	DeadLettered []string `json:"dead_lettered,omitempty"`
	// Endpoint is the state after the action; absent when it could not be
	// read back.
	Endpoint *EndpointDoc `json:"endpoint,omitempty"`
}

// adminActionTimeout bounds one admin action in the store. Disabling drains
// the backlog in batches of 100, so it gets more than a request-path call.
const adminActionTimeout = 2 * time.Minute

// maxAdminBody bounds the JSON body of an admin action, in bytes.
const maxAdminBody = 4 << 10

// adminRead wraps a read handler of the admin API: a token of scope read
// (or write) is required (SPEC §9).
func (s *Server) adminRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.d.Admin.Check(r.Header.Get("Authorization"), auth.ScopeRead); err != nil {
			problem.Write(w, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// handleListEndpoints serves GET /admin/v1/endpoints: one EndpointState
// round trip per configured endpoint.
func (s *Server) handleListEndpoints() http.HandlerFunc {
	return s.adminRead(func(w http.ResponseWriter, r *http.Request) {
		list := EndpointList{Endpoints: []EndpointDoc{}}
		for _, name := range s.d.Config.EndpointNames() {
			ep, _ := s.d.Config.Endpoint(name)
			st, err := s.d.AdminStore.EndpointState(r.Context(), name)
			if err != nil {
				problem.Write(w, problem.FromStore(err))
				return
			}
			list.Endpoints = append(list.Endpoints, s.endpointDoc(ep, st))
		}
		writeJSON(w, http.StatusOK, list)
	})
}

// handleGetEndpoint serves GET /admin/v1/endpoints/{name}.
func (s *Server) handleGetEndpoint() http.HandlerFunc {
	return s.adminRead(func(w http.ResponseWriter, r *http.Request) {
		ep, ok := s.d.Config.Endpoint(chi.URLParam(r, "name"))
		if !ok {
			problem.Write(w, unknownEndpoint(chi.URLParam(r, "name")))
			return
		}
		st, err := s.d.AdminStore.EndpointState(r.Context(), ep.Name)
		if err != nil {
			problem.Write(w, problem.FromStore(err))
			return
		}
		writeJSON(w, http.StatusOK, s.endpointDoc(ep, st))
	})
}

// endpointDoc renders st of ep as of now.
func (s *Server) endpointDoc(ep *config.Endpoint, st policy.EndpointState) EndpointDoc {
	now := s.d.Now()
	d := EndpointDoc{
		Name: ep.Name, Gate: string(st.Gate.State), Breaker: string(st.Breaker),
		ConsecutiveFailures: st.ConsecutiveFailures, OpenedAt: timeOrNil(st.OpenedAt),
		LastSuccessAt: timeOrNil(st.LastSuccessAt), OutageStartedAt: timeOrNil(st.OutageStartedAt),
		Disabled: st.Disabled, DisabledReason: st.DisabledReason, DisabledAt: timeOrNil(st.DisabledAt),
		BacklogItems: st.Due + st.Leased, BacklogBytes: st.BacklogBytes, InFlight: st.Leased,
		DeadLetters: st.DeadLetters, BreakerFailures: ep.BreakerFailures,
		BreakerProbeInterval: ep.BreakerProbeInterval.String(),
		DisableAfter:         s.d.Config.Policy.DisableAfter.String(),
	}
	if st.Breaker != policy.BreakerClosed {
		d.NextProbeAt = timeOrNil(st.ProbeAt)
	}
	if st.ProbeOut {
		d.ProbeOutUntil = timeOrNil(st.ProbeUntil)
	}
	if st.PausedUntil.After(now) {
		d.PausedUntil = timeOrNil(st.PausedUntil)
	}
	return d
}

// timeOrNil is t in UTC, or nil when t is zero (left out of the JSON).
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// The admin actions on an endpoint, as named in EndpointActionResult and
// the audit log.
const (
	actionEnable       = "enable"
	actionDisable      = "disable"
	actionBreakerReset = "breaker_reset"
)

// actionOutcome is what one admin action did.
type actionOutcome struct {
	changed      bool
	deadLettered []string
}

// actionFunc performs an admin action on ep, whose state just before was
// before; token is the admin token's name.
type actionFunc func(ctx context.Context, ep *config.Endpoint, before policy.EndpointState,
	token, reason string) (actionOutcome, error)

// handleEndpointAction serves POST /admin/v1/endpoints/{name}/{action}: a
// token of scope write is required; every attempt, refused or not, is
// audit-logged with the token's name (SPEC §9). The optional JSON body
// {"reason": "..."} (at most 4 KiB) goes into the audit line and is kept
// with a disable.
func (s *Server) handleEndpointAction(action string, do actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		au := audit{s: s, r: r, action: action, endpoint: name}
		token, err := s.d.Admin.Check(r.Header.Get("Authorization"), auth.ScopeWrite)
		if err != nil {
			au.token, _ = s.d.Admin.Check(r.Header.Get("Authorization"), auth.ScopeRead)
			au.refused(w, err)
			return
		}
		au.token = token
		ep, ok := s.d.Config.Endpoint(name)
		if !ok {
			au.refused(w, unknownEndpoint(name))
			return
		}
		reason, err := actionReason(r)
		if err != nil {
			au.refused(w, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), adminActionTimeout)
		defer cancel()
		before, err := s.d.AdminStore.EndpointState(ctx, ep.Name)
		if err != nil {
			au.refused(w, problem.FromStore(err))
			return
		}
		out, err := do(ctx, ep, before, token, reason)
		s.deadLettered(ctx, ep, out.deadLettered)
		if err != nil {
			au.refused(w, problem.FromStore(err), slog.Int("dead_lettered", len(out.deadLettered)))
			return
		}
		if s.d.Wake != nil && action != actionDisable {
			s.d.Wake()
		}
		res := EndpointActionResult{Action: action, Changed: out.changed, DeadLettered: out.deadLettered}
		if after, err := s.d.AdminStore.EndpointState(ctx, ep.Name); err == nil {
			doc := s.endpointDoc(ep, after)
			res.Endpoint = &doc
		}
		au.log(slog.LevelInfo, "ok", slog.Bool("changed", out.changed),
			slog.Int("dead_lettered", len(out.deadLettered)), slog.String("reason", reason))
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, res)
	}
}

// actionReason reads the optional JSON body {"reason": "..."} of an admin
// action: at most maxAdminBody bytes; an empty body is no reason.
// Errors: InvalidRequest.
func actionReason(r *http.Request) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	if err != nil {
		return "", problem.Wrap(problem.InvalidRequest, "could not read the request body", err)
	}
	if len(b) > maxAdminBody {
		return "", problem.Errorf(problem.InvalidRequest, "the body is over "+strconv.Itoa(maxAdminBody)+" bytes")
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return "", nil
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return "", problem.Errorf(problem.InvalidRequest, `the body must be JSON: {"reason": "..."}`)
	}
	return strings.TrimSpace(body.Reason), nil
}

// enableEndpoint re-enables ep (SPEC §6 "Only an admin re-enables it").
// Enabling also closes the breaker and clears the failure count, pause and
// outage: the endpoint starts afresh.
func (s *Server) enableEndpoint(ctx context.Context, ep *config.Endpoint, before policy.EndpointState,
	_, _ string) (actionOutcome, error) {
	if err := s.d.AdminStore.Enable(ctx, ep.Name); err != nil {
		return actionOutcome{}, err
	}
	if before.Breaker != policy.BreakerClosed {
		s.d.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "closed").Inc()
	}
	return actionOutcome{changed: before.Disabled}, nil
}

// disableEndpoint disables ep; its pending callouts become dead letters
// with reason endpoint_disabled (SPEC §6). The stored reason names the
// token: "admin <token>" or "admin <token>: <reason>".
func (s *Server) disableEndpoint(ctx context.Context, ep *config.Endpoint, _ policy.EndpointState,
	token, reason string) (actionOutcome, error) {
	why := "admin " + token
	if reason != "" {
		why += ": " + reason
	}
	res, err := s.d.AdminStore.Disable(ctx, ep.Name, why)
	if res.Newly {
		s.d.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "disabled").Inc()
	}
	return actionOutcome{changed: res.Newly, deadLettered: res.DeadLettered}, err
}

// resetBreaker closes ep's breaker and lifts its pause (calloutctl
// endpoints reset); a disabled endpoint stays disabled.
func (s *Server) resetBreaker(ctx context.Context, ep *config.Endpoint, before policy.EndpointState,
	_, _ string) (actionOutcome, error) {
	if err := s.d.AdminStore.ResetBreaker(ctx, ep.Name); err != nil {
		return actionOutcome{}, err
	}
	if before.Breaker != policy.BreakerClosed {
		s.d.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "closed").Inc()
	}
	changed := before.Breaker != policy.BreakerClosed || before.ConsecutiveFailures > 0 ||
		before.PausedUntil.After(s.d.Now())
	return actionOutcome{changed: changed}, nil
}

// deadLettered counts and hands on the callouts an admin disable turned
// into dead letters, as the breaker Watcher does for an auto-disable.
func (s *Server) deadLettered(ctx context.Context, ep *config.Endpoint, ids []string) {
	for _, id := range ids {
		s.d.Metrics.DeadLetters.WithLabelValues(ep.Name, string(policy.DeadLetterEndpointDisabled)).Inc()
		if s.d.Events != nil {
			s.d.Events.Finished(ctx, policy.Finished{ID: id, Endpoint: ep.Name,
				State: policy.DeadLettered, Reason: policy.DeadLetterEndpointDisabled})
		}
	}
}

// audit writes the audit line of one admin write action (SPEC §9): msg
// "audit" with the token's name ("" when no valid token was presented),
// the action, the endpoint and the result.
type audit struct {
	s        *Server
	r        *http.Request
	token    string
	action   string
	endpoint string
}

// log writes the audit line.
func (a audit) log(level slog.Level, result string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("token", a.token), slog.String("action", a.action),
		slog.String("endpoint", a.endpoint), slog.String("result", result),
		slog.String("remote_addr", a.r.RemoteAddr)}, attrs...)
	a.s.d.Logger.LogAttrs(a.r.Context(), level, "audit", attrs...)
}

// refused audit-logs a refused or failed action, with the problem code as
// its result, and answers with the problem.
func (a audit) refused(w http.ResponseWriter, err error, attrs ...slog.Attr) {
	pe := problem.From(err)
	attrs = append(attrs, slog.String("detail", pe.Detail))
	if pe.Err != nil {
		attrs = append(attrs, slog.String("cause", pe.Err.Error()))
	}
	a.log(slog.LevelWarn, string(pe.Code), attrs...)
	problem.Write(w, pe)
}

// unknownEndpoint is the 404 of an admin route naming no configured endpoint.
func unknownEndpoint(name string) error {
	return problem.Errorf(problem.UnknownEndpoint, "no endpoint "+strconv.Quote(name)+" is configured")
}

// countDeferred counts a request held back by a shut gate in
// callout_deferred_total{endpoint,reason}: a read refused, or a write
// accepted held (SPEC §4 "breaker open"). reason is the gate state
// (breaker_open, probing or paused); a disabled endpoint refuses rather
// than defers, so it is not counted here (callout_rejected_total is).
func (s *Server) countDeferred(endpoint string, g policy.Gate) {
	if g.State == policy.GateDisabled || !g.Shut() {
		return
	}
	s.d.Metrics.Deferred.WithLabelValues(endpoint, string(g.State)).Inc()
}
