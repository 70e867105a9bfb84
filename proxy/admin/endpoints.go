package admin

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
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// actionTimeout bounds one admin action on an endpoint in the store.
// Disabling drains the backlog in batches of 100, so it gets more than a
// request-path call.
const actionTimeout = 2 * time.Minute

// maxActionBody bounds the JSON body of an endpoint action, in bytes.
const maxActionBody = 4 << 10

// handleListEndpoints serves GET /admin/v1/endpoints: one EndpointState
// round trip per configured endpoint, by name.
func (s *server) handleListEndpoints(w http.ResponseWriter, r *http.Request) {
	list := api.EndpointList{Endpoints: []api.EndpointDoc{}}
	for _, name := range s.d.Config.EndpointNames() {
		ep, _ := s.d.Config.Endpoint(name)
		st, err := s.d.Endpoints.EndpointState(r.Context(), name)
		if err != nil {
			problem.Write(w, problem.FromStore(err))
			return
		}
		list.Endpoints = append(list.Endpoints, s.endpointDoc(ep, st))
	}
	httpx.WriteJSON(w, http.StatusOK, list)
}

// handleGetEndpoint serves GET /admin/v1/endpoints/{name}.
func (s *server) handleGetEndpoint(w http.ResponseWriter, r *http.Request) {
	ep, ok := s.d.Config.Endpoint(chi.URLParam(r, "name"))
	if !ok {
		problem.Write(w, unknownEndpoint(chi.URLParam(r, "name")))
		return
	}
	st, err := s.d.Endpoints.EndpointState(r.Context(), ep.Name)
	if err != nil {
		problem.Write(w, problem.FromStore(err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, s.endpointDoc(ep, st))
}

// endpointDoc renders st of ep as of now.
func (s *server) endpointDoc(ep *config.Endpoint, st policy.EndpointState) api.EndpointDoc {
	now := s.d.Now()
	d := api.EndpointDoc{
		Name: ep.Name, Gate: st.Gate.State, Breaker: st.Breaker,
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
	d.BreakerPartition = ep.Breaker.Partition
	for _, p := range st.Partitions {
		d.Partitions = append(d.Partitions, api.PartitionDoc{Issuer: p.Issuer, Breaker: p.Breaker,
			ConsecutiveFailures: p.ConsecutiveFailures, OpenedAt: timeOrNil(p.OpenedAt), NextProbeAt: timeOrNil(p.ProbeAt)})
	}
	if st.ProbeOut {
		d.ProbeOutUntil = timeOrNil(st.ProbeUntil)
	}
	if st.PausedUntil.After(now) {
		d.PausedUntil = timeOrNil(st.PausedUntil)
	}
	return d
}

// The admin actions on an endpoint, as named in api.EndpointActionResult
// and the audit log.
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
// before; token is the admin token's name, reason the caller's.
type actionFunc func(ctx context.Context, ep *config.Endpoint, before policy.EndpointState,
	token, reason string) (actionOutcome, error)

// handleEndpointAction serves POST /admin/v1/endpoints/{name}/{action}: a
// token of scope write is required; every attempt, refused or not, is
// audit-logged with the token's name (contract §9). The optional JSON body
// {"reason": "..."} (at most 4 KiB) goes into the audit line and is kept
// with a disable.
func (s *server) handleEndpointAction(action string, do actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		au := audit{s: s, r: r, action: action, endpoint: name}
		token, ok := s.authorize(w, r, auth.ScopeWrite, &au)
		if !ok {
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
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), actionTimeout)
		defer cancel()
		before, err := s.d.Endpoints.EndpointState(ctx, ep.Name)
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
		res := api.EndpointActionResult{Action: action, Changed: out.changed, DeadLettered: out.deadLettered}
		if after, err := s.d.Endpoints.EndpointState(ctx, ep.Name); err == nil {
			doc := s.endpointDoc(ep, after)
			res.Endpoint = &doc
		}
		au.log(slog.LevelInfo, "ok", slog.Bool("changed", out.changed),
			slog.Int("dead_lettered", len(out.deadLettered)), slog.String("reason", reason))
		w.Header().Set("Cache-Control", "no-store")
		httpx.WriteJSON(w, http.StatusOK, res)
	}
}

// actionReason reads the optional JSON body {"reason": "..."} of an admin
// action: at most maxActionBody bytes; an empty body is no reason.
// Errors: InvalidRequest.
func actionReason(r *http.Request) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxActionBody+1))
	if err != nil {
		return "", problem.Wrap(problem.InvalidRequest, "could not read the request body", err)
	}
	if len(b) > maxActionBody {
		return "", problem.Errorf(problem.InvalidRequest, "the body is over "+strconv.Itoa(maxActionBody)+" bytes")
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

// enableEndpoint re-enables ep (contract §6 "Only an admin re-enables it").
// Enabling also closes the breaker and clears the failure count, pause and
// outage: the endpoint starts afresh. callout_breaker_state goes from
// disabled (or open, half_open) to closed, so it counts one transition to
// closed: an enable is the gate's disabled → open (contract §12), not a
// breaker state of its own.
func (s *server) enableEndpoint(ctx context.Context, ep *config.Endpoint, before policy.EndpointState,
	_, _ string) (actionOutcome, error) {
	if err := s.d.Endpoints.Enable(ctx, ep.Name); err != nil {
		return actionOutcome{}, err
	}
	if before.Disabled || before.Breaker != policy.BreakerClosed {
		s.d.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "closed").Inc()
	}
	return actionOutcome{changed: before.Disabled}, nil
}

// countClosed counts the breaker transition to closed that resetting ep
// made: one when its breaker was open or half-open before.
func (s *server) countClosed(ep *config.Endpoint, before policy.EndpointState) {
	if before.Breaker != policy.BreakerClosed {
		s.d.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "closed").Inc()
	}
}

// disableEndpoint disables ep; its pending callouts become dead letters
// with reason endpoint_disabled (contract §6). The stored reason names the
// token: "admin <token>" or "admin <token>: <reason>".
func (s *server) disableEndpoint(ctx context.Context, ep *config.Endpoint, _ policy.EndpointState,
	token, reason string) (actionOutcome, error) {
	why := "admin " + token
	if reason != "" {
		why += ": " + reason
	}
	res, err := s.d.Endpoints.Disable(ctx, ep.Name, why)
	if res.Newly {
		s.d.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "disabled").Inc()
	}
	return actionOutcome{changed: res.Newly, deadLettered: res.DeadLettered}, err
}

// resetBreaker closes ep's breaker and lifts its pause (calloutctl
// endpoints reset); a disabled endpoint stays disabled.
func (s *server) resetBreaker(ctx context.Context, ep *config.Endpoint, before policy.EndpointState,
	_, _ string) (actionOutcome, error) {
	if err := s.d.Endpoints.ResetBreaker(ctx, ep.Name); err != nil {
		return actionOutcome{}, err
	}
	s.countClosed(ep, before)
	changed := before.Breaker != policy.BreakerClosed || before.ConsecutiveFailures > 0 ||
		before.PausedUntil.After(s.d.Now())
	return actionOutcome{changed: changed}, nil
}

// deadLettered counts and hands on the callouts an admin disable turned
// into dead letters, as the breaker Watcher does for an auto-disable.
func (s *server) deadLettered(ctx context.Context, ep *config.Endpoint, ids []string) {
	if s.d.Stats != nil && len(ids) > 0 {
		s.d.Stats.DeadLetter(ep.Name, len(ids))
	}
	for _, id := range ids {
		s.d.Metrics.DeadLetters.WithLabelValues(ep.Name, string(policy.DeadLetterEndpointDisabled)).Inc()
		if s.d.Events != nil {
			s.d.Events.Finished(ctx, policy.Finished{ID: id, Endpoint: ep.Name,
				State: policy.DeadLettered, Reason: policy.DeadLetterEndpointDisabled})
		}
	}
}

// unknownEndpoint is the 404 of an admin route naming no configured endpoint.
func unknownEndpoint(name string) error {
	return problem.Errorf(problem.UnknownEndpoint, "no endpoint "+strconv.Quote(name)+" is configured")
}
