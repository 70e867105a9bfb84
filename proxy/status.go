package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/statusdoc"
)

// accepted answers 202 with the status document of callout id (contract §4):
// Callout-Outcome retryable, Location, Preference-Applied when a
// preference was honoured. When the record cannot be read back the 202
// still goes out, with the id alone: the callout is recorded.
func (s *Server) accepted(ctx context.Context, w http.ResponseWriter, endpoint, id, applied string) {
	gctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	c, err := s.d.Store.Get(gctx, id)
	if err != nil {
		s.d.Logger.WarnContext(ctx, "status document unavailable for a 202", "callout_id", id, "error", err,
			s.tr.LogAttr(ctx))
		writeAccepted(w, id, applied, nil)
		return
	}
	doc := statusdoc.Render(c, s.redactions.For(endpoint))
	doc.HeldBy = s.heldBy(gctx, c)
	writeAccepted(w, id, applied, &doc)
}

// heldBy is the held_by of c's status document (statusdoc.HeldBy), when
// the store can read gates.
func (s *Server) heldBy(ctx context.Context, c *policy.Callout) *api.HeldByDoc {
	gr, ok := s.d.Store.(statusdoc.GateReader)
	if !ok {
		return nil
	}
	return statusdoc.HeldBy(ctx, gr, c)
}

// writeAccepted writes a 202 with doc (or a minimal one holding the id).
func writeAccepted(w http.ResponseWriter, id, applied string, doc *api.StatusDocument) {
	h := w.Header()
	h.Set("Callout-Outcome", string(policy.Retryable))
	h.Set("Callout-Id", id)
	h.Set("Location", "/v1/callouts/"+id)
	if applied != "" {
		h.Set("Preference-Applied", applied)
	}
	if doc == nil {
		httpx.WriteJSON(w, http.StatusAccepted, map[string]string{"id": id, "state": string(policy.Scheduled),
			"outcome": string(policy.Retryable)})
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, doc)
}

// handleGetCallout serves GET /v1/callouts/{id}: the status document, only
// to callers of the callout's own organisation (same JWT issuer). Another
// org's callout is answered 404, as if it did not exist.
func (s *Server) handleGetCallout() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, err := s.verifyCaller(r)
		if err != nil {
			problem.Write(w, err)
			return
		}
		id := chi.URLParam(r, "id")
		c, err := s.d.Store.Get(r.Context(), id)
		switch {
		case errors.Is(err, policy.ErrNotFound) || (err == nil && c.Issuer != caller.Issuer):
			problem.Write(w, problem.Errorf(problem.NotFound, "no callout "+strconv.Quote(id)+" for this organisation"))
			return
		case err != nil:
			problem.Write(w, problem.FromStore(err))
			return
		}
		w.Header().Set("Callout-Id", c.ID)
		w.Header().Set("Callout-Outcome", string(statusdoc.Outcome(c)))
		doc := statusdoc.Render(c, s.redactions.For(c.Endpoint))
		doc.HeldBy = s.heldBy(r.Context(), c)
		httpx.WriteJSON(w, http.StatusOK, doc)
	}
}

// handleGetPolicy serves GET /v1/policy to any authenticated caller.
func (s *Server) handleGetPolicy() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.verifyCaller(r); err != nil {
			problem.Write(w, err)
			return
		}
		p := s.d.Config.Policy
		httpx.WriteJSON(w, http.StatusOK, api.PolicyDocument{
			MaxAttempts: p.MaxAttempts, MaxAge: p.MaxAge.String(), BaseDelay: p.BaseDelay.String(),
			Multiplier: p.Multiplier, MaxDelay: p.MaxDelay.String(), RetryAfterCap: p.RetryAfterCap.String(),
			ConnectTimeout: p.ConnectTimeout.String(), HeaderTimeout: p.HeaderTimeout.String(),
			AttemptTimeout: p.AttemptTimeout.String(), BreakerFailures: p.BreakerFailures,
			BreakerProbeInterval: p.BreakerProbeInterval.String(), DisableAfter: p.DisableAfter.String(),
			IdempotencyRetention: p.IdempotencyRetention.String(),
			DeadLetterRetention:  p.DeadLetterRetention.String(),
			MaxRequestBytes:      p.MaxRequestBytes, MaxResponseBytes: p.MaxResponseBytes,
			Envelope: policy.BackoffEnvelope(p),
		})
	}
}

// formatSeconds is d in whole seconds, for Preference-Applied: wait=N.
func formatSeconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
