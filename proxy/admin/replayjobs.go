package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// maxJobBody bounds the JSON body creating a replay job, in bytes (room
// for replay.MaxIDs ids).
const maxJobBody = 1 << 20

// handleCreateReplayJob serves POST /admin/v1/replay-jobs, scope write,
// audit-logged: body api.ReplayJobSpec as JSON, e.g. {"filters":
// [{"endpoints": ["payment-api"], "since": "…", "until": "…", "statuses":
// [503], "reasons": ["exhausted"]}], "ids": ["…"], "dry_run": false,
// "rate": 200}. 201 with the job and Location.
func (s *server) handleCreateReplayJob(w http.ResponseWriter, r *http.Request) {
	au, ok := s.requireWrite(w, r, "replay_job.create", "job_id", "")
	if !ok {
		return
	}
	var body api.ReplayJobSpec
	if err := decodeJobSpec(r, &body); err != nil {
		au.refused(w, err)
		return
	}
	ctx, cancel := storeContext(r)
	defer cancel()
	j, err := s.d.ReplayJobs.CreateJob(ctx, specOf(body), au.token)
	if err != nil {
		au.refused(w, err)
		return
	}
	created, _ := replay.SpecOf(j)
	filters, _ := json.Marshal(created.Filters)
	au.log(slog.LevelInfo, "ok", slog.String("job_id", j.ID), slog.Bool("dry_run", created.DryRun),
		slog.Float64("rate", created.Rate), slog.String("filters", string(filters)),
		slog.Int("ids", len(created.IDs)))
	w.Header().Set("Location", "/admin/v1/replay-jobs/"+j.ID)
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, jobDoc(j))
}

// decodeJobSpec reads an api.ReplayJobSpec body strictly: at most
// maxJobBody bytes, one JSON object, unknown keys refused. Errors:
// InvalidRequest.
func decodeJobSpec(r *http.Request, sp *api.ReplayJobSpec) error {
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

// specOf is the replay service's spec of a job body (replay.Filter is
// defined as api.ReplayFilter, so a filter converts as it is).
func specOf(b api.ReplayJobSpec) replay.Spec {
	sp := replay.Spec{IDs: b.IDs, DryRun: b.DryRun, Rate: b.Rate}
	for _, f := range b.Filters {
		sp.Filters = append(sp.Filters, replay.Filter(f))
	}
	return sp
}

// handleListReplayJobs serves GET /admin/v1/replay-jobs?limit=N (default
// 20, newest first).
func (s *server) handleListReplayJobs(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r.URL.Query(), "limit", 20)
	if err != nil {
		problem.Write(w, err)
		return
	}
	js, err := s.d.ReplayJobs.Jobs(r.Context(), limit)
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	out := api.ReplayJobList{Jobs: make([]api.ReplayJob, 0, len(js))}
	for _, j := range js {
		out.Jobs = append(out.Jobs, jobDoc(j))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleGetReplayJob serves GET /admin/v1/replay-jobs/{id}.
func (s *server) handleGetReplayJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.d.ReplayJobs.Job(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, jobDoc(j))
}

// handleReplayJobItems serves GET /admin/v1/replay-jobs/{id}/items
// ?offset=&limit= (limit 1–1000, default 100).
func (s *server) handleReplayJobItems(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err := intParam(q, "offset", 0)
	limit, lerr := intParam(q, "limit", 100)
	if err = cmp.Or(err, lerr); err != nil {
		problem.Write(w, err)
		return
	}
	page, err := s.d.ReplayJobs.JobItems(r.Context(), chi.URLParam(r, "id"), offset, limit)
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	out := api.ReplayJobItems{Items: make([]api.ReplayJobItemDoc, 0, len(page.Items)), NextOffset: page.Next}
	for _, it := range page.Items {
		d := api.ReplayJobItemDoc{DeadLetterID: it.DeadLetterID, Status: it.Status,
			ReplayID: it.ReplayID, Detail: it.Detail}
		if it.DeadLetter != nil {
			sum := s.summaryDoc(*it.DeadLetter)
			d.DeadLetter = &sum
		}
		out.Items = append(out.Items, d)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleCancelReplayJob serves POST /admin/v1/replay-jobs/{id}/cancel,
// scope write (writeOnID), audit-logged: 202 with the job, cancelling until its
// replica stops before its next send (or cancelled at once when no
// replica runs it); a job that completed or failed is returned as it is,
// 200.
func (s *server) handleCancelReplayJob(ctx context.Context, w http.ResponseWriter, au audit, id string) {
	j, err := s.d.ReplayJobs.CancelJob(ctx, id, au.token)
	if err != nil {
		au.refused(w, err, slog.String("job_id", id))
		return
	}
	au.log(slog.LevelInfo, "ok", slog.String("job_id", id), slog.String("state", string(j.State)),
		slog.Int("sent", j.Sent), slog.Int("total", j.Total))
	status := http.StatusAccepted
	if j.State == policy.JobCompleted || j.State == policy.JobFailed {
		status = http.StatusOK // it ended before the cancel
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, status, jobDoc(j))
}

// jobDoc renders a stored replay job with its decoded spec. A spec that
// cannot be read (replay.SpecOf) shows as the job's error,
// replay.UnreadableSpec, unless it has one. Done is the sum of the handled
// items; a job that ended has no phase.
func jobDoc(j policy.ReplayJob) api.ReplayJob {
	sp, err := replay.SpecOf(j)
	if err != nil && j.Error == "" {
		j.Error = replay.UnreadableSpec
	}
	d := api.ReplayJob{
		ID: j.ID, State: j.State, Phase: j.Phase, DryRun: sp.DryRun, Rate: sp.Rate,
		IDCount: len(sp.IDs), CreatedBy: j.CreatedBy, CreatedAt: j.CreatedAt.UTC(),
		StartedAt: timeOrNil(j.StartedAt), FinishedAt: timeOrNil(j.FinishedAt), UpdatedAt: j.UpdatedAt.UTC(),
		CancelledBy: j.CancelledBy, CancelledAt: timeOrNil(j.CancelledAt), Total: j.Total,
		Done: j.Sent + j.WouldSend + j.Skipped + j.Refused + j.Failed,
		Sent: j.Sent, WouldSend: j.WouldSend, Skipped: j.Skipped, Refused: j.Refused, Failed: j.Failed, Error: j.Error,
	}
	for _, f := range sp.Filters {
		if !f.Since.IsZero() {
			f.Since = f.Since.UTC()
		}
		if !f.Until.IsZero() {
			f.Until = f.Until.UTC()
		}
		d.Filters = append(d.Filters, api.ReplayFilter(f))
	}
	if j.State.Final() {
		d.Phase = ""
	}
	return d
}
