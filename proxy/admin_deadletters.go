package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/calloutproxy/callout-proxy/proxy/statusdoc"
)

// DeadLetterAdmin is what the admin API's dead-letter, callout and replay
// routes need (SPEC §7, §8, §9). *replay.Service implements it; its
// methods document their errors.
type DeadLetterAdmin interface {
	DeadLetters(ctx context.Context, q replay.Query) (replay.Page, error)
	DeadLetter(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error)
	Callout(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error)
	Replay(ctx context.Context, id, by, jobID string) (replay.Result, error)
	Discard(ctx context.Context, id string) error
	CreateJob(ctx context.Context, sp replay.Spec, by string) (policy.ReplayJob, error)
	Job(ctx context.Context, id string) (policy.ReplayJob, error)
	Jobs(ctx context.Context, limit int) ([]policy.ReplayJob, error)
	JobItems(ctx context.Context, id string, offset, limit int) (replay.ItemPage, error)
	CancelJob(ctx context.Context, id, by string) (policy.ReplayJob, error)
}

// mountDeadLetterRoutes adds the dead-letter, callout and replay-job
// routes to r, relative to /admin/v1 (SPEC §9): GETs need a token of scope
// read, the rest scope write, and every write is audit-logged with the
// token's name. Nothing is mounted when Deps.DeadLetters is nil.
func (s *Server) mountDeadLetterRoutes(r chi.Router) {
	if s.d.DeadLetters == nil {
		return
	}
	r.Get("/dead-letters", s.adminRead(s.handleListDeadLetters))
	r.Get("/dead-letters/{id}", s.adminRead(s.handleGetDeadLetter))
	r.Post("/dead-letters/{id}/replay", s.handleReplayDeadLetter)
	r.Delete("/dead-letters/{id}", s.handleDiscardDeadLetter)
	r.Get("/callouts/{id}", s.adminRead(s.handleAdminGetCallout))
	r.Get("/replay-jobs", s.adminRead(s.handleListReplayJobs))
	r.Post("/replay-jobs", s.handleCreateReplayJob)
	r.Get("/replay-jobs/{id}", s.adminRead(s.handleGetReplayJob))
	r.Get("/replay-jobs/{id}/items", s.adminRead(s.handleReplayJobItems))
	r.Post("/replay-jobs/{id}/cancel", s.handleCancelReplayJob)
}

// DeadLetterSummaryDoc is one dead letter of GET /admin/v1/dead-letters and
// of a replay job's items (SPEC §7). Times are RFC 3339 in UTC with
// millisecond precision. Status is the last upstream status, 0 when the
// callout never got an answer. LastError is redacted.
type DeadLetterSummaryDoc struct {
	ID             string     `json:"id"`
	Endpoint       string     `json:"endpoint"`
	DeadLetteredAt time.Time  `json:"dead_lettered_at"`
	Reason         string     `json:"reason"`
	Status         int        `json:"status"`
	Method         string     `json:"method"`
	Path           string     `json:"path"`
	Attempts       int        `json:"attempts"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	SourceRecord   string     `json:"source_record,omitempty"`
	ReplayOf       string     `json:"replay_of,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	ReplayedBy     string     `json:"replayed_by,omitempty"`
	ReplayedAt     *time.Time `json:"replayed_at,omitempty"`
}

// DeadLetterList is the body of GET /admin/v1/dead-letters: one page, by
// endpoint name then oldest first. NextCursor, when set, is the cursor
// query parameter of the next page; a page may be short (even empty) and
// still have one.
type DeadLetterList struct {
	Items      []DeadLetterSummaryDoc `json:"items"`
	NextCursor string                 `json:"next_cursor,omitempty"`
}

// CalloutDoc is GET /admin/v1/dead-letters/{id} and /admin/v1/callouts/{id}:
// the status document (SPEC §4) of any organisation's callout plus what an
// operator needs to judge a replay: the request as the caller sent it and
// the record's times. Secrets are redacted (SPEC §7); the stored copy
// keeps them for the replay.
type CalloutDoc struct {
	api.StatusDocument
	Issuer         string     `json:"issuer"`
	CreatedAt      time.Time  `json:"created_at"`
	FirstAttemptAt *time.Time `json:"first_attempt_at,omitempty"`
	// FinishedAt is when it ended; for a dead letter, when it became one.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Request    RequestDoc `json:"request"`
	ReplayedBy string     `json:"replayed_by,omitempty"`
	ReplayedAt *time.Time `json:"replayed_at,omitempty"`
}

// RequestDoc is the caller's request as stored. Query and Headers and a
// JSON or form Body are redacted; Body is text when valid UTF-8, else
// base64 with BodyEncoding "base64". BodyBytes is the stored body's size.
type RequestDoc struct {
	Method       string      `json:"method"`
	Path         string      `json:"path"`
	Query        string      `json:"query,omitempty"`
	Headers      http.Header `json:"headers"`
	Body         string      `json:"body"`
	BodyEncoding string      `json:"body_encoding,omitempty"`
	BodyBytes    int         `json:"body_bytes"`
}

// ReplayResultDoc is the body of POST /admin/v1/dead-letters/{id}/replay:
// 202 with Created true and Location /admin/v1/callouts/{replay_id} for a
// new chain; 200 with Created false when a chain that has not
// dead-lettered already holds the dead letter's Idempotency-Key (ReplayID
// names it; nothing was sent).
type ReplayResultDoc struct {
	DeadLetterID string `json:"dead_letter_id"`
	Endpoint     string `json:"endpoint"`
	ReplayID     string `json:"replay_id"`
	Created      bool   `json:"created"`
	State        string `json:"state"`
}

// handleListDeadLetters serves GET /admin/v1/dead-letters?endpoint=&since=
// &until=&status=&reason=&cursor=&limit= (SPEC §8 filters; endpoint, status
// and reason may repeat or be comma-separated; since and until are RFC 3339
// and inclusive; limit 1–1000, default 100).
func (s *Server) handleListDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := filterOf(q)
	if err != nil {
		problem.Write(w, err)
		return
	}
	limit, err := intParam(q, "limit", 100)
	if err != nil {
		problem.Write(w, err)
		return
	}
	page, err := s.d.DeadLetters.DeadLetters(r.Context(), replay.Query{Filter: f, Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	out := DeadLetterList{Items: make([]DeadLetterSummaryDoc, 0, len(page.Items)), NextCursor: page.Next}
	for _, d := range page.Items {
		out.Items = append(out.Items, s.summaryDoc(d))
	}
	writeJSON(w, http.StatusOK, out)
}

// summaryDoc renders a dead letter's summary, redacted.
func (s *Server) summaryDoc(d policy.DeadLetter) DeadLetterSummaryDoc {
	return DeadLetterSummaryDoc{
		ID: d.ID, Endpoint: d.Endpoint, DeadLetteredAt: d.DeadLetteredAt.UTC(), Reason: string(d.Reason),
		Status: d.Status, Method: d.Method, Path: d.Path, Attempts: d.Attempts,
		IdempotencyKey: d.IdempotencyKey, SourceRecord: d.SourceRecord, ReplayOf: d.ReplayOf,
		LastError: s.redactions.For(d.Endpoint).Text(d.LastError), ReplayedBy: d.ReplayedBy,
		ReplayedAt: timeOrNil(d.ReplayedAt),
	}
}

// handleGetDeadLetter serves GET /admin/v1/dead-letters/{id}: 404 unless
// it is a dead letter.
func (s *Server) handleGetDeadLetter(w http.ResponseWriter, r *http.Request) {
	c, m, err := s.d.DeadLetters.DeadLetter(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	writeJSON(w, http.StatusOK, s.calloutDoc(c, m))
}

// handleAdminGetCallout serves GET /admin/v1/callouts/{id}: any callout of
// any organisation, for `calloutctl callouts get` (the caller-facing
// GET /v1/callouts/{id} needs the organisation's JWT).
func (s *Server) handleAdminGetCallout(w http.ResponseWriter, r *http.Request) {
	c, m, err := s.d.DeadLetters.Callout(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	w.Header().Set("Callout-Id", c.ID)
	writeJSON(w, http.StatusOK, s.calloutDoc(c, m))
}

// calloutDoc renders c with its endpoint's redaction rules.
func (s *Server) calloutDoc(c *policy.Callout, m policy.ReplayMark) CalloutDoc {
	rules := s.redactions.For(c.Endpoint)
	body, _ := rules.JSONBody(c.Header.Get("Content-Type"), c.Body)
	req := RequestDoc{Method: c.Method, Path: c.Path, Query: rules.Query(c.Query),
		Headers: rules.Header(c.Header), BodyBytes: len(c.Body)}
	if req.Headers == nil {
		req.Headers = http.Header{}
	}
	if utf8.Valid(body) {
		req.Body = string(body)
	} else {
		req.Body, req.BodyEncoding = base64.StdEncoding.EncodeToString(body), "base64"
	}
	return CalloutDoc{
		StatusDocument: statusdoc.Render(c, rules), Issuer: c.Issuer, CreatedAt: c.CreatedAt.UTC(),
		FirstAttemptAt: timeOrNil(c.FirstAttemptAt), FinishedAt: timeOrNil(c.FinishedAt), Request: req,
		ReplayedBy: m.ReplayedBy, ReplayedAt: timeOrNil(m.ReplayedAt),
	}
}

// handleReplayDeadLetter serves POST /admin/v1/dead-letters/{id}/replay
// (SPEC §8), scope write. The replay service writes the audit line of the
// replay; a refused token is audited here.
func (s *Server) handleReplayDeadLetter(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	token, ok := s.adminWrite(w, r, "replay", "dead_letter_id", id)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeOpTimeout)
	defer cancel()
	res, err := s.d.DeadLetters.Replay(ctx, id, token, "")
	if err != nil {
		pe := problem.From(err)
		if errors.Is(err, replay.ErrSuperseded) {
			pe.CalloutID = res.ReplayID
		}
		problem.Write(w, pe)
		return
	}
	doc := ReplayResultDoc{DeadLetterID: id, Endpoint: res.Endpoint, ReplayID: res.ReplayID,
		Created: res.Created, State: string(res.State)}
	status := http.StatusOK
	if res.Created {
		status = http.StatusAccepted
		w.Header().Set("Location", "/admin/v1/callouts/"+res.ReplayID)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, doc)
}

// handleDiscardDeadLetter serves DELETE /admin/v1/dead-letters/{id} (SPEC
// §7 "Discarded"), scope write, audit-logged: 204 when deleted.
func (s *Server) handleDiscardDeadLetter(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	token, ok := s.adminWrite(w, r, "discard", "dead_letter_id", id)
	if !ok {
		return
	}
	au := audit{s: s, r: r, token: token, action: "discard"}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeOpTimeout)
	defer cancel()
	if err := s.d.DeadLetters.Discard(ctx, id); err != nil {
		au.refused(w, problem.From(err), slog.String("dead_letter_id", id))
		return
	}
	au.log(slog.LevelInfo, "ok", slog.String("dead_letter_id", id))
	w.WriteHeader(http.StatusNoContent)
}

// adminWrite checks that the request carries a token of scope write and
// returns its name; when not, it audit-logs the refusal (action, with the
// attribute key=value) under the token's name when the token is valid for
// reading, and answers the problem.
func (s *Server) adminWrite(w http.ResponseWriter, r *http.Request, action, key, value string) (string, bool) {
	token, err := s.d.Admin.Check(r.Header.Get("Authorization"), auth.ScopeWrite)
	if err == nil {
		return token, true
	}
	au := audit{s: s, r: r, action: action}
	au.token, _ = s.d.Admin.Check(r.Header.Get("Authorization"), auth.ScopeRead)
	au.refused(w, err, slog.String(key, value))
	return "", false
}

// filterOf reads a replay.Filter from list query parameters.
func filterOf(q url.Values) (replay.Filter, error) {
	var f replay.Filter
	f.Endpoints = listParam(q, "endpoint")
	for _, r := range listParam(q, "reason") {
		f.Reasons = append(f.Reasons, policy.DeadLetterReason(r))
	}
	for _, v := range listParam(q, "status") {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, problem.Errorf(problem.InvalidRequest, "status "+strconv.Quote(v)+" is not a number")
		}
		f.Statuses = append(f.Statuses, n)
	}
	var err error
	if f.Since, err = timeParam(q, "since"); err != nil {
		return f, err
	}
	if f.Until, err = timeParam(q, "until"); err != nil {
		return f, err
	}
	return f, nil
}

// listParam returns every value of key, comma-separated values split.
func listParam(q url.Values, key string) []string {
	var out []string
	for _, v := range q[key] {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// timeParam parses an RFC 3339 query parameter; absent is the zero time.
func timeParam(q url.Values, key string) (time.Time, error) {
	v := q.Get(key)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, problem.Errorf(problem.InvalidRequest, key+" must be an RFC 3339 time, e.g. 2025-01-31T14:00:00Z")
	}
	return t, nil
}

// intParam parses a non-negative integer query parameter; absent is def.
func intParam(q url.Values, key string, def int) (int, error) {
	v := q.Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, problem.Errorf(problem.InvalidRequest, key+" must be a non-negative integer")
	}
	return n, nil
}
