package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// jobItemsPageSize is the number of a job's items one page shows, and
// collectPageSize the number read per API call when the console gathers a
// dry run's items.
const (
	jobItemsPageSize = 100
	collectPageSize  = 1000
)

// replayFormData is the page that starts a bulk replay of a filter.
type replayFormData struct {
	Filter  filterForm
	Spec    api.ReplayFilter
	Problem string
}

// specFilter turns the console's filter into the job's filter (contract §8):
// endpoints, reasons and statuses split at commas, the times parsed.
// Errors: a status that is not a number, a time that does not parse; the
// API validates the rest.
func (f filterForm) specFilter() (api.ReplayFilter, error) {
	sf := api.ReplayFilter{Endpoints: commaList(f.Endpoint)}
	for _, rs := range commaList(f.Reason) {
		sf.Reasons = append(sf.Reasons, policy.DeadLetterReason(rs))
	}
	for _, st := range commaList(f.Status) {
		n, err := strconv.Atoi(st)
		if err != nil {
			return sf, errors.New("status " + strconv.Quote(st) + " is not a number")
		}
		sf.Statuses = append(sf.Statuses, n)
	}
	var err error
	if sf.Since, err = formTime("since", f.Since); err != nil {
		return sf, err
	}
	if sf.Until, err = formTime("until", f.Until); err != nil {
		return sf, err
	}
	return sf, nil
}

// commaList is the non-empty parts of the comma-separated s, trimmed.
func commaList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// handleReplayForm serves GET /console/replay?<filter>: the filter a bulk
// replay will take, and the form that starts its dry run.
func (c *console) handleReplayForm(w http.ResponseWriter, r *http.Request, s *session) {
	d := replayFormData{Filter: filterFormOf(r.URL.Query())}
	var err error
	if d.Spec, err = d.Filter.specFilter(); err != nil {
		d.Problem = err.Error()
		c.render(w, r, s, http.StatusBadRequest, "replay_new", "Replay dead letters", d)
		return
	}
	c.render(w, r, s, http.StatusOK, "replay_new", "Replay dead letters", d)
}

// handleCreateDryRun serves POST /console/replay-jobs (form: the filter,
// rate): POST /admin/v1/replay-jobs with the filter and dry_run true
// (write scope, audit-logged), then the dry run's page, which lists what
// the real job will send.
func (c *console) handleCreateDryRun(w http.ResponseWriter, r *http.Request, s *session) {
	f := filterFormOf(r.PostForm)
	sf, err := f.specFilter()
	if err != nil {
		c.render(w, r, s, http.StatusBadRequest, "replay_new", "Replay dead letters",
			replayFormData{Filter: f, Problem: err.Error()})
		return
	}
	spec := api.ReplayJobSpec{Filters: []api.ReplayFilter{sf}, DryRun: true}
	if v := strings.TrimSpace(r.PostForm.Get("rate")); v != "" {
		if spec.Rate, err = strconv.ParseFloat(v, 64); err != nil {
			c.render(w, r, s, http.StatusBadRequest, "replay_new", "Replay dead letters",
				replayFormData{Filter: f, Spec: sf, Problem: "rate must be a number of dead letters per second"})
			return
		}
	}
	var job api.ReplayJob
	if _, err := c.call(r.Context(), r, s, http.MethodPost, "/admin/v1/replay-jobs", spec, &job); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	http.Redirect(w, r, Base+"/replay-jobs/"+url.PathEscape(job.ID), http.StatusSeeOther)
}

// handleRunDryRun serves POST /console/replay-jobs/{id}/run: the real job
// of a finished dry run, made of exactly the dead letters the dry run
// listed as would_send (POST /admin/v1/replay-jobs with those ids and the
// dry run's rate), so it sends what the operator saw and nothing that
// arrived since. Then the new job's page.
func (c *console) handleRunDryRun(w http.ResponseWriter, r *http.Request, s *session) {
	job, ok := c.job(w, r, s)
	if !ok {
		return
	}
	if !job.DryRun || job.State != policy.JobCompleted {
		c.renderError(w, r, s, http.StatusConflict, "Not a finished dry run",
			"Only a dry run that completed can be run for real; this job is "+string(job.State)+".")
		return
	}
	ids, err := c.wouldSend(r, s, job)
	if err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	if len(ids) == 0 {
		c.renderError(w, r, s, http.StatusConflict, "Nothing to send", "The dry run found no dead letter to send.")
		return
	}
	var created api.ReplayJob
	spec := api.ReplayJobSpec{IDs: ids, Rate: job.Rate}
	if _, err := c.call(r.Context(), r, s, http.MethodPost, "/admin/v1/replay-jobs", spec, &created); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	http.Redirect(w, r, Base+"/replay-jobs/"+url.PathEscape(created.ID), http.StatusSeeOther)
}

// wouldSend returns the ids of a dry run's would_send items, in collection
// order, reading its items page by page (at most Total/collectPageSize+1
// pages).
func (c *console) wouldSend(r *http.Request, s *session, job api.ReplayJob) ([]string, error) {
	var ids []string
	offset := 0
	for range job.Total/collectPageSize + 1 {
		var page api.ReplayJobItems
		path := "/admin/v1/replay-jobs/" + url.PathEscape(job.ID) + "/items?offset=" + strconv.Itoa(offset) +
			"&limit=" + strconv.Itoa(collectPageSize)
		if err := c.get(r, s, path, &page); err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			if it.Status == policy.ItemWouldSend {
				ids = append(ids, it.DeadLetterID)
			}
		}
		if page.NextOffset == 0 {
			break
		}
		offset = page.NextOffset
	}
	return ids, nil
}

// handleCancelJob serves POST /console/replay-jobs/{id}/cancel: POST
// /admin/v1/replay-jobs/{id}/cancel (write scope, audit-logged), then the
// job's page.
func (c *console) handleCancelJob(w http.ResponseWriter, r *http.Request, s *session) {
	id := chi.URLParam(r, "id")
	if _, err := c.call(r.Context(), r, s, http.MethodPost,
		"/admin/v1/replay-jobs/"+url.PathEscape(id)+"/cancel", nil, nil); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	http.Redirect(w, r, Base+"/replay-jobs/"+url.PathEscape(id), http.StatusSeeOther)
}

// jobView is a replay job with its measured progress.
type jobView struct {
	api.ReplayJob
	// Percent is Done of Total in whole per cent.
	Percent int
	// Observed is the measured rate, dead letters handled per second since
	// the job started (0 before); ETA the time left at that rate ("" when
	// it cannot be told).
	Observed float64
	ETA      string
}

// jobViewOf measures j at now.
func jobViewOf(j api.ReplayJob, now time.Time) jobView {
	v := jobView{ReplayJob: j, Percent: percent(j.Done, j.Total)}
	if j.StartedAt == nil || j.Done == 0 {
		return v
	}
	end := now
	if j.FinishedAt != nil {
		end = *j.FinishedAt
	}
	secs := end.Sub(*j.StartedAt).Seconds()
	if secs <= 0 {
		return v
	}
	v.Observed = float64(j.Done) / secs
	if !j.State.Final() && j.Phase == policy.PhaseSend && j.Total > j.Done {
		v.ETA = span(time.Duration(float64(j.Total-j.Done) / v.Observed * float64(time.Second)).Round(time.Second))
	}
	return v
}

// jobData is a replay job's page.
type jobData struct {
	Job        jobView
	Items      []api.ReplayJobItemDoc
	Offset     int
	NextOffset int
}

// job reads the replay job the route's {id} names (GET
// /admin/v1/replay-jobs/{id}); on an error it renders it and returns false.
func (c *console) job(w http.ResponseWriter, r *http.Request, s *session) (api.ReplayJob, bool) {
	var job api.ReplayJob
	if err := c.get(r, s, "/admin/v1/replay-jobs/"+url.PathEscape(chi.URLParam(r, "id")), &job); err != nil {
		c.renderAPIError(w, r, s, err)
		return job, false
	}
	return job, true
}

// Final reports whether the job ended: its page then stops updating.
func (d jobData) Final() bool { return d.Job.State.Final() }

// handleReplayJob serves GET /console/replay-jobs/{id}?offset=: the job's
// progress (GET /admin/v1/replay-jobs/{id}) and one page of its items.
func (c *console) handleReplayJob(w http.ResponseWriter, r *http.Request, s *session) {
	job, ok := c.job(w, r, s)
	if !ok {
		return
	}
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	offset = max(offset, 0)
	var items api.ReplayJobItems
	path := "/admin/v1/replay-jobs/" + url.PathEscape(chi.URLParam(r, "id")) + "/items?offset=" + strconv.Itoa(offset) +
		"&limit=" + strconv.Itoa(jobItemsPageSize)
	if err := c.get(r, s, path, &items); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	d := jobData{Job: jobViewOf(job, c.d.Now()), Items: items.Items, Offset: offset, NextOffset: items.NextOffset}
	c.render(w, r, s, http.StatusOK, "replayjob", "Replay job "+job.ID, d)
}

// jobsData is the replay-job list page.
type jobsData struct {
	Jobs []jobView
}

// handleReplayJobs serves GET /console/replay-jobs: the newest 20 jobs
// (GET /admin/v1/replay-jobs).
func (c *console) handleReplayJobs(w http.ResponseWriter, r *http.Request, s *session) {
	var list api.ReplayJobList
	if err := c.get(r, s, "/admin/v1/replay-jobs?limit=20", &list); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	now := c.d.Now()
	d := jobsData{}
	for _, j := range list.Jobs {
		d.Jobs = append(d.Jobs, jobViewOf(j, now))
	}
	c.render(w, r, s, http.StatusOK, "replayjobs", "Replay jobs", d)
}
