package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// ReplayJobDoc is a replay job and its progress (SPEC §8): GET
// /admin/v1/replay-jobs/{id}, each entry of GET /admin/v1/replay-jobs, and
// the answer to creating or cancelling one.
//
// State is queued, running, cancelling, cancelled, completed or failed.
// Phase, while running, is collect (matching dead letters are being
// gathered: Total grows) or send (Total is final; Done of Total handled).
// Every handled dead letter is exactly one of Sent (a new replay chain),
// Skipped (already replayed, superseded by a newer dead letter, or gone),
// Refused (endpoint disabled or no longer configured, backlog full) or
// Failed (store error, or its replica died while sending it); Done is their
// sum, and Total − Done of a cancelled job were never sent. Rate is dead letters per second. Filters
// are as created, each without an until given the creation time. Times are
// RFC 3339 in UTC.
type ReplayJobDoc struct {
	ID          string          `json:"id"`
	State       string          `json:"state"`
	Phase       string          `json:"phase,omitempty"`
	DryRun      bool            `json:"dry_run"`
	Rate        float64         `json:"rate"`
	Filters     []replay.Filter `json:"filters,omitempty"`
	IDCount     int             `json:"id_count,omitempty"`
	CreatedBy   string          `json:"created_by"`
	CreatedAt   time.Time       `json:"created_at"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	UpdatedAt   time.Time       `json:"updated_at"`
	CancelledBy string          `json:"cancelled_by,omitempty"`
	CancelledAt *time.Time      `json:"cancelled_at,omitempty"`
	Total       int             `json:"total"`
	Done        int             `json:"done"`
	Sent        int             `json:"sent"`
	Skipped     int             `json:"skipped"`
	Refused     int             `json:"refused"`
	Failed      int             `json:"failed"`
	Error       string          `json:"error,omitempty"`
}

// ReplayJobList is the body of GET /admin/v1/replay-jobs?limit=N (default
// 20, newest first).
type ReplayJobList struct {
	Jobs []ReplayJobDoc `json:"jobs"`
}

// ReplayJobItemDoc is one dead letter of a replay job. Status is queued,
// sending, would_send (dry run), sent, skipped, refused or failed; Detail
// a short code saying why (already_replayed, superseded, not_found,
// not_sent, endpoint_disabled, unknown_endpoint, backlog_full,
// interrupted, store_unavailable). ReplayID is the new chain (sent) or the
// chain or newer dead letter holding its key (skipped). DeadLetter is its
// summary while it is kept.
type ReplayJobItemDoc struct {
	DeadLetterID string                `json:"dead_letter_id"`
	Status       string                `json:"status"`
	ReplayID     string                `json:"replay_id,omitempty"`
	Detail       string                `json:"detail,omitempty"`
	DeadLetter   *DeadLetterSummaryDoc `json:"dead_letter,omitempty"`
}

// ReplayJobItems is the body of GET /admin/v1/replay-jobs/{id}/items
// ?offset=&limit=: items in collection order; NextOffset, when set, is the
// offset of the next page.
type ReplayJobItems struct {
	Items      []ReplayJobItemDoc `json:"items"`
	NextOffset int                `json:"next_offset,omitempty"`
}

// maxJobBody bounds the JSON body creating a replay job, in bytes (room
// for replay.MaxIDs ids).
const maxJobBody = 1 << 20

// handleCreateReplayJob serves POST /admin/v1/replay-jobs, scope write,
// audit-logged: body replay.Spec as JSON, e.g. {"filters": [{"endpoints":
// ["payment-api"], "since": "…", "until": "…", "statuses": [503],
// "reasons": ["exhausted"]}], "ids": ["…"], "dry_run": false, "rate": 200}.
// 201 with the job and Location.
func (s *Server) handleCreateReplayJob(w http.ResponseWriter, r *http.Request) {
	token, ok := s.adminWrite(w, r, "replay_job.create", "job_id", "")
	if !ok {
		return
	}
	au := audit{s: s, r: r, token: token, action: "replay_job.create"}
	var sp replay.Spec
	if err := decodeJobSpec(r, &sp); err != nil {
		au.refused(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeOpTimeout)
	defer cancel()
	j, err := s.d.DeadLetters.CreateJob(ctx, sp, token)
	if err != nil {
		au.refused(w, problem.From(err))
		return
	}
	created, _ := replay.SpecOf(j)
	filters, _ := json.Marshal(created.Filters)
	au.log(slog.LevelInfo, "ok", slog.String("job_id", j.ID), slog.Bool("dry_run", created.DryRun),
		slog.Float64("rate", created.Rate), slog.String("filters", string(filters)),
		slog.Int("ids", len(created.IDs)))
	w.Header().Set("Location", "/admin/v1/replay-jobs/"+j.ID)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, jobDoc(j))
}

// decodeJobSpec reads a replay.Spec body strictly (unknown keys refused).
func decodeJobSpec(r *http.Request, sp *replay.Spec) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxJobBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(sp); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return problem.Errorf(problem.InvalidRequest, "the body is over "+strconv.Itoa(maxJobBody)+" bytes")
		}
		return problem.Errorf(problem.InvalidRequest, "the body must be a replay job as JSON: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return problem.Errorf(problem.InvalidRequest, "the body must hold one JSON object")
	}
	return nil
}

// handleListReplayJobs serves GET /admin/v1/replay-jobs?limit=N.
func (s *Server) handleListReplayJobs(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r.URL.Query(), "limit", 20)
	if err != nil {
		problem.Write(w, err)
		return
	}
	js, err := s.d.DeadLetters.Jobs(r.Context(), limit)
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	out := ReplayJobList{Jobs: make([]ReplayJobDoc, 0, len(js))}
	for _, j := range js {
		out.Jobs = append(out.Jobs, jobDoc(j))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleGetReplayJob serves GET /admin/v1/replay-jobs/{id}.
func (s *Server) handleGetReplayJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.d.DeadLetters.Job(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	writeJSON(w, http.StatusOK, jobDoc(j))
}

// handleReplayJobItems serves GET /admin/v1/replay-jobs/{id}/items
// ?offset=&limit= (limit 1–1000, default 100).
func (s *Server) handleReplayJobItems(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err := intParam(q, "offset", 0)
	if err != nil {
		problem.Write(w, err)
		return
	}
	limit, err := intParam(q, "limit", 100)
	if err != nil {
		problem.Write(w, err)
		return
	}
	page, err := s.d.DeadLetters.JobItems(r.Context(), chi.URLParam(r, "id"), offset, limit)
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	out := ReplayJobItems{Items: make([]ReplayJobItemDoc, 0, len(page.Items)), NextOffset: page.Next}
	for _, it := range page.Items {
		d := ReplayJobItemDoc{DeadLetterID: it.DeadLetterID, Status: string(it.Status),
			ReplayID: it.ReplayID, Detail: it.Detail}
		if it.DeadLetter != nil {
			sum := s.summaryDoc(*it.DeadLetter)
			d.DeadLetter = &sum
		}
		out.Items = append(out.Items, d)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleCancelReplayJob serves POST /admin/v1/replay-jobs/{id}/cancel,
// scope write, audit-logged: 202 with the job, cancelling until its
// replica stops before its next send (or cancelled at once when no
// replica runs it); a job that completed or failed is returned as it is,
// 200.
func (s *Server) handleCancelReplayJob(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	token, ok := s.adminWrite(w, r, "replay_job.cancel", "job_id", id)
	if !ok {
		return
	}
	au := audit{s: s, r: r, token: token, action: "replay_job.cancel"}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeOpTimeout)
	defer cancel()
	j, err := s.d.DeadLetters.CancelJob(ctx, id, token)
	if err != nil {
		au.refused(w, problem.From(err), slog.String("job_id", id))
		return
	}
	au.log(slog.LevelInfo, "ok", slog.String("job_id", id), slog.String("state", string(j.State)),
		slog.Int("sent", j.Sent), slog.Int("total", j.Total))
	status := http.StatusAccepted
	if j.State == policy.JobCompleted || j.State == policy.JobFailed {
		status = http.StatusOK // it ended before the cancel
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, jobDoc(j))
}

// jobDoc renders a replay job. A spec that cannot be read (SpecOf) shows
// as the job's error, replay.UnreadableSpec, unless it has one.
func jobDoc(j policy.ReplayJob) ReplayJobDoc {
	sp, err := replay.SpecOf(j)
	if err != nil && j.Error == "" {
		j.Error = replay.UnreadableSpec
	}
	d := ReplayJobDoc{
		ID: j.ID, State: string(j.State), Phase: string(j.Phase), DryRun: sp.DryRun, Rate: sp.Rate,
		IDCount: len(sp.IDs), CreatedBy: j.CreatedBy, CreatedAt: j.CreatedAt.UTC(),
		StartedAt: timeOrNil(j.StartedAt), FinishedAt: timeOrNil(j.FinishedAt), UpdatedAt: j.UpdatedAt.UTC(),
		CancelledBy: j.CancelledBy, CancelledAt: timeOrNil(j.CancelledAt), Total: j.Total,
		Done: j.Sent + j.Skipped + j.Refused + j.Failed,
		Sent: j.Sent, Skipped: j.Skipped, Refused: j.Refused, Failed: j.Failed, Error: j.Error,
	}
	for _, f := range sp.Filters {
		if !f.Since.IsZero() {
			f.Since = f.Since.UTC()
		}
		if !f.Until.IsZero() {
			f.Until = f.Until.UTC()
		}
		d.Filters = append(d.Filters, f)
	}
	if j.State.Final() {
		d.Phase = ""
	}
	return d
}
