package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// read serves a read (GET, HEAD, OPTIONS) without Prefer: respond-async:
// no callout record, the upstream's answer passed through (SPEC §4). The
// breaker is consulted first (one round trip) and told of anything but a
// plain success. When Redis is unreachable a read without a key still
// passes through, without the breaker; a read with a key is refused.
func (s *Server) read(w http.ResponseWriter, r *http.Request, in *inbound) {
	ep := in.ep
	br := ep.Rules().Breaker()
	actx, cancel := context.WithTimeout(r.Context(), storeOpTimeout)
	adm, err := s.d.Store.Admit(actx, ep.Name, br)
	cancel()
	storeDown := err != nil
	switch {
	case storeDown && in.key != "":
		s.reject(w, r, ep.Name, problem.Wrap(problem.StoreUnavailable,
			"the callout store (Redis) is unreachable; reads with an Idempotency-Key are not forwarded", err))
		return
	case storeDown:
		s.d.Logger.Warn("store unreachable; read passed through without the breaker",
			"endpoint", ep.Name, "error", err)
	case adm.Gate.Shut():
		s.countDeferred(ep.Name, adm.Gate)
		s.reject(w, r, ep.Name, gateProblem(adm.Gate, s.d.Now()))
		return
	}
	kind := string(policy.KindFirst)
	if adm.ProbeToken != "" {
		kind = string(policy.KindProbe)
	}
	att := s.d.Upstream.Do(r.Context(), ep, in.request(r))
	var pe *problem.Error
	if errors.As(att.Err, &pe) {
		s.reject(w, r, ep.Name, pe)
		return
	}
	cls := s.observe(ep, "", att, kind)
	if !storeDown && (adm.ProbeToken != "" || cls.Outcome != policy.Success || adm.ConsecutiveFailures > 0) {
		s.recordRead(r.Context(), in, adm, att, cls)
	}
	s.respond(w, ep, att, cls)
}

// recordRead tells the breaker (and the 429 pause) of a read's result. A
// failure here is logged, not returned: the caller already has its answer.
func (s *Server) recordRead(ctx context.Context, in *inbound, adm policy.Admission,
	att forward.Attempt, cls policy.Classification) {
	rr := policy.ReadResult{
		ProbeToken: adm.ProbeToken, Success: cls.Outcome == policy.Success,
		CountsTowardBreaker: policy.CountsTowardBreaker(cls), Breaker: in.ep.Rules().Breaker(),
		PausedUntil: policy.PauseUntil(s.d.Config.Policy, att.Result().Response, s.d.Now()),
	}
	change, err := s.d.Store.RecordResult(ctx, in.ep.Name, rr)
	if err != nil {
		s.d.Logger.Warn("breaker update failed", "endpoint", in.ep.Name, "error", err)
		return
	}
	s.d.Breakers.Changed(ctx, in.ep, change)
}

// gateProblem is the refusal of a request meeting a shut gate: 503 with
// Retry-After in whole seconds until the gate may reopen (SPEC §4).
func gateProblem(g policy.Gate, now time.Time) *problem.Error {
	retry := 0
	if !g.Until.IsZero() {
		retry = int((g.Until.Sub(now) + time.Second - 1) / time.Second)
		retry = max(retry, 1)
	}
	switch g.State {
	case policy.GateDisabled:
		return problem.Errorf(problem.EndpointDisabled, "the endpoint is disabled; an admin must re-enable it")
	case policy.GatePaused:
		return &problem.Error{Code: problem.EndpointPaused, RetryAfter: retry,
			Detail: "the upstream asked for a pause (429 Retry-After); retry in " + strconv.Itoa(retry) + " s"}
	default:
		return &problem.Error{Code: problem.BreakerOpen, RetryAfter: retry,
			Detail: "the endpoint's circuit breaker is open; the next probe is in " + strconv.Itoa(retry) + " s"}
	}
}
