package proxy

import (
	"context"
	"errors"
	"net/http"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// read serves a read (GET, HEAD, OPTIONS) without Prefer: respond-async:
// no callout record, the upstream's answer passed through (contract §4). The
// gate is consulted first — from this replica's gate cache when it is
// fresh (Gates.CachedAdmission: no round trip for a healthy endpoint, nor for
// one whose breaker is open or paused until a known time), else in Redis,
// which also hands out the half-open probe token — and the breaker is told
// of anything but a plain success to an endpoint with no failures counted.
// When Redis is unreachable a read without a key still passes through,
// without the breaker; a read with a key is refused, so it always asks
// Redis (Gates.Admit).
func (s *Server) read(w http.ResponseWriter, r *http.Request, in *inbound) {
	ep := in.ep
	br := ep.Rules().Breaker()
	var adm policy.Admission
	var err error
	cached := false
	gate := in.gateName()
	if in.key == "" {
		adm, cached = s.d.Gates.CachedAdmission(gate)
	}
	if !cached {
		actx, cancel := context.WithTimeout(r.Context(), storeOpTimeout)
		adm, err = s.d.Gates.Admit(actx, gate, br)
		cancel()
	}
	storeDown := err != nil
	switch {
	case storeDown && in.key != "":
		s.reject(w, r, ep.Name, storeRefusal(err, "reads with an Idempotency-Key are not forwarded"))
		return
	case storeDown:
		s.d.Logger.Warn("store unreachable; read passed through without the breaker",
			"endpoint", ep.Name, "error", err, s.tr.LogAttr(r.Context()))
	case adm.Gate.Shut():
		s.countDeferred(ep.Name, adm.Gate)
		s.reject(w, r, ep.Name, problem.FromGate(adm.Gate, s.d.Now()))
		return
	}
	kind := policy.KindFirst
	if adm.ProbeToken != "" {
		kind = policy.KindProbe
	}
	s.admitted(r, in, tracing.AdmitAttempt, "", "")
	actx, span := s.startReadAttempt(r.Context(), r, in, kind)
	att := s.d.Upstream.Do(actx, ep, in.request(r))
	if att.Err != nil && limit.WasCut(r.Context()) {
		// Cut at its upstream for the organisation's connection share
		// (contract §10): the proxy ended it, not the upstream, so the
		// breaker is not told; a read is safe to send again.
		span.EndAttempt(tracing.AttemptEnd{Outcome: policy.Retryable, Problem: string(problem.Overloaded)})
		w.Header().Set("Connection", "close")
		s.reject(w, r, ep.Name, s.connectionShare(policy.Retryable))
		return
	}
	if pe, ok := errors.AsType[*problem.Error](att.Err); ok {
		span.EndAttempt(tracing.AttemptEnd{Outcome: policy.Rejected, Problem: string(pe.Code)})
		s.reject(w, r, ep.Name, pe)
		return
	}
	cls := s.attempts.Observe(actx, ep, "", 1, kind, att)
	if !storeDown && (adm.ProbeToken != "" || cls.Outcome != policy.Success || adm.ConsecutiveFailures > 0) {
		s.recordRead(actx, in, adm, att, cls)
	}
	if errors.Is(att.Err, policy.ErrOverloaded) {
		// The upstream answered but the memory budget had no room to
		// buffer it: the proxy's own limit (reason overloaded), which the
		// breaker does not count, as for a write (a probe's token is given
		// back). The caller gets 503 overloaded, not the upstream's answer.
		span.EndAttempt(tracing.AttemptEnd{Outcome: policy.Retryable, Problem: string(problem.Overloaded)})
		s.reject(w, r, ep.Name, s.overloadedBy(att.Err, policy.Retryable))
		return
	}
	span.EndAttempt(tracing.Decided(att.Result(), cls, policy.Completion{}, s.d.Config.Policy, s.d.Now()))
	s.respond(w, ep, att, cls)
}

// gateName is the gate a read of in meets (contract §6 breaker partitions):
// its organisation's partition of the endpoint, "endpoint/issuer", where the
// endpoint's breaker is partitioned by organisation, else the endpoint.
func (in *inbound) gateName() string {
	if in.ep.PartitionedByOrganisation() {
		return keyspace.PartitionGate(in.ep.Name, in.caller.Issuer)
	}
	return in.ep.Name
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
	change, err := s.d.Store.RecordResult(ctx, in.gateName(), rr)
	if err != nil {
		s.d.Logger.Warn("breaker update failed", "endpoint", in.ep.Name, "error", err, s.tr.LogAttr(ctx))
		return
	}
	s.d.Breakers.Changed(ctx, in.ep, change)
}

// countDeferred counts a request held back by a shut gate in
// callout_deferred_total{endpoint,reason}: a read refused, or a write
// accepted held (contract §4 "breaker open"). reason is the gate state
// (breaker_open, probing or paused); a disabled endpoint refuses rather
// than defers, so it is not counted here (callout_rejected_total is).
func (s *Server) countDeferred(endpoint string, g policy.Gate) {
	if g.State == policy.GateDisabled || !g.Shut() {
		return
	}
	s.d.Metrics.Deferred.WithLabelValues(endpoint, string(g.State)).Inc()
}
