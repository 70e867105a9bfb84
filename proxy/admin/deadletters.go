package admin

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/calloutproxy/callout-proxy/proxy/statusdoc"
)

// handleListDeadLetters serves GET /admin/v1/dead-letters?endpoint=&since=
// &until=&status=&reason=&unresolved=&cursor=&limit= (contract §8 filters;
// endpoint, status and reason may repeat or be comma-separated; since and
// until are RFC 3339 and inclusive; unresolved=true keeps only dead letters
// whose replays have not succeeded; limit 1–1000, default 100).
func (s *server) handleListDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := filterOf(q)
	limit, lerr := intParam(q, "limit", 100)
	if err = cmp.Or(err, lerr); err != nil {
		problem.Write(w, err)
		return
	}
	page, err := s.d.DeadLetters.DeadLetters(r.Context(), replay.Query{Filter: f, Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	out := api.DeadLetterList{Items: make([]api.DeadLetterSummaryDoc, 0, len(page.Items)), NextCursor: page.Next}
	for _, d := range page.Items {
		out.Items = append(out.Items, s.summaryDoc(d))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// summaryDoc renders a dead letter's summary, its last error redacted.
func (s *server) summaryDoc(d policy.DeadLetter) api.DeadLetterSummaryDoc {
	return api.DeadLetterSummaryDoc{
		ID: d.ID, Endpoint: d.Endpoint, DeadLetteredAt: d.DeadLetteredAt.UTC(), Reason: d.Reason,
		Status: d.Status, Method: d.Method, Path: d.Path, Attempts: d.Attempts,
		IdempotencyKey: d.IdempotencyKey, SourceRecord: d.SourceRecord, ReplayOf: d.ReplayOf,
		LastError: s.redactions.For(d.Endpoint).Text(d.LastError), ReplayedBy: d.ReplayedBy,
		ReplayedAt: timeOrNil(d.ReplayedAt), ReplayOutcome: d.Resolution,
	}
}

// handleGetDeadLetter serves GET /admin/v1/dead-letters/{id}: 404 unless
// it is a dead letter.
func (s *server) handleGetDeadLetter(w http.ResponseWriter, r *http.Request) {
	c, m, err := s.d.DeadLetters.DeadLetter(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, s.calloutDoc(c, m))
}

// handleGetCallout serves GET /admin/v1/callouts/{id}: any callout of any
// organisation, for `calloutctl callouts get` (the caller-facing
// GET /v1/callouts/{id} needs the organisation's JWT).
func (s *server) handleGetCallout(w http.ResponseWriter, r *http.Request) {
	c, m, err := s.d.DeadLetters.Callout(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	w.Header().Set("Callout-Id", c.ID)
	doc := s.calloutDoc(c, m)
	if gr, ok := s.d.Endpoints.(statusdoc.GateReader); ok {
		doc.HeldBy = statusdoc.HeldBy(r.Context(), gr, c)
	}
	httpx.WriteJSON(w, http.StatusOK, doc)
}

// calloutDoc renders c and its replay mark m with its endpoint's redaction
// rules: the status document, then the request as stored.
func (s *server) calloutDoc(c *policy.Callout, m policy.ReplayMark) api.CalloutDoc {
	rules := s.redactions.For(c.Endpoint)
	body, _ := rules.JSONBody(c.Header.Get("Content-Type"), c.Body)
	req := api.RequestDoc{Method: c.Method, Path: c.Path, Query: rules.Query(c.Query),
		Headers: rules.Header(c.Header), BodyBytes: len(c.Body)}
	if req.Headers == nil {
		req.Headers = http.Header{}
	}
	req.Body, req.BodyEncoding = statusdoc.Body(body)
	return api.CalloutDoc{
		StatusDocument: statusdoc.Render(c, rules), Issuer: c.Issuer, CreatedAt: c.CreatedAt.UTC(),
		FirstAttemptAt: timeOrNil(c.FirstAttemptAt), FinishedAt: timeOrNil(c.FinishedAt), Request: req,
		ReplayedBy: m.ReplayedBy, ReplayedAt: timeOrNil(m.ReplayedAt), ReplayOutcome: m.Resolution,
	}
}

// handleReplayDeadLetter serves POST /admin/v1/dead-letters/{id}/replay
// (contract §8), scope write: 202 with Location for a new chain, 200 when a
// chain already holds the key; a dead letter superseded by a newer one is
// a 409 naming it in callout_id. The replay service writes the audit line
// of the replay; a refused token is audited by writeOnID.
func (s *server) handleReplayDeadLetter(ctx context.Context, w http.ResponseWriter, au audit, id string) {
	res, err := s.d.DeadLetters.Replay(ctx, id, au.token, "")
	if err != nil {
		pe := problem.From(err)
		if errors.Is(err, replay.ErrSuperseded) {
			pe.CalloutID = res.ReplayID
		}
		problem.Write(w, pe)
		return
	}
	doc := api.ReplayResultDoc{DeadLetterID: id, Endpoint: res.Endpoint, ReplayID: res.ReplayID,
		Created: res.Created, State: res.State}
	status := http.StatusOK
	if res.Created {
		status = http.StatusAccepted
		w.Header().Set("Location", "/admin/v1/callouts/"+res.ReplayID)
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, status, doc)
}

// handleDiscardDeadLetter serves DELETE /admin/v1/dead-letters/{id} (contract
// §7 "Discarded"), scope write (writeOnID), audit-logged: 204 when deleted.
func (s *server) handleDiscardDeadLetter(ctx context.Context, w http.ResponseWriter, au audit, id string) {
	if err := s.d.DeadLetters.Discard(ctx, id); err != nil {
		au.refused(w, err, slog.String("dead_letter_id", id))
		return
	}
	au.log(slog.LevelInfo, "ok", slog.String("dead_letter_id", id))
	w.WriteHeader(http.StatusNoContent)
}
