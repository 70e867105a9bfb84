package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
)

// jobIDOf is the replay job a redirect names.
var jobIDOf = regexp.MustCompile(`^/console/replay-jobs/([A-Za-z0-9_-]+)$`)

func TestBulkReplayFromItsDryRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var crm []string
		for _, k := range []string{"a", "b", "c"} {
			crm = append(crm, e.deadLetter(t, newCallout("crm-api", "k-"+k, "application/json", []byte(`{}`)), "no"))
		}
		pay := e.deadLetter(t, newCallout("pay-api", "k-pay", "application/json", []byte(`{}`)), "no")
		ops := e.browser(t)
		csrf := ops.login(writeToken)

		ops.get("/console/replay?endpoint=crm-api&reason=permanent&replay=none").wantStatus(t, http.StatusOK).
			wantBody(t, "<dd>crm-api</dd>", "<dd>permanent</dd>", `name="endpoint" value="crm-api"`,
				"are not part of a job", "Start the dry run")
		ops.get("/console/replay?status=x").wantStatus(t, http.StatusBadRequest).wantBody(t, "is not a number")

		// The dry run: nothing sent, its items are what the job will send.
		p := ops.post("/console/replay-jobs", url.Values{"csrf": {csrf}, "endpoint": {"crm-api"},
			"reason": {"permanent"}, "rate": {"5"}}).wantStatus(t, http.StatusSeeOther)
		m := jobIDOf.FindStringSubmatch(p.Header.Get("Location"))
		if m == nil {
			t.Fatalf("Location %q", p.Header.Get("Location"))
		}
		dry := m[1]
		ops.get("/console/replay-jobs/"+dry).wantStatus(t, http.StatusOK).
			wantBody(t, `data-job-state="queued"`, "dry run: nothing is sent", `data-refresh="2"`, "Cancel the job")
		e.svc.RunJob(ctxT(t), dry)
		p = ops.get("/console/replay-jobs/"+dry).wantStatus(t, http.StatusOK)
		p.wantBody(t, `data-job-state="completed"`, "What the job will send", "Replay the dead letters listed as would_send",
			"at 5/s").wantNoBody(t, `data-refresh=`, "Cancel the job", `data-item="`+pay+`"`)
		for _, id := range crm {
			p.wantBody(t, `data-item="`+id+`"`)
		}
		if n := strings.Count(p.Body, `badge item-would_send`); n != 3 {
			t.Fatalf("%d would_send items, want 3", n)
		}

		// A dead letter that arrives after the dry run is not in the real job.
		late := e.deadLetter(t, newCallout("crm-api", "k-late", "application/json", []byte(`{}`)), "no")
		p = ops.post("/console/replay-jobs/"+dry+"/run", url.Values{"csrf": {csrf}}).wantStatus(t, http.StatusSeeOther)
		real := jobIDOf.FindStringSubmatch(p.Header.Get("Location"))[1]
		e.svc.RunJob(ctxT(t), real)
		p = ops.get("/console/replay-jobs/"+real).wantStatus(t, http.StatusOK)
		p.wantBody(t, `data-job-state="completed"`, `<strong data-progress>100 %</strong>`, `<span data-sent>3</span> sent`,
			"Dead letters named</dt><dd>3</dd>").wantNoBody(t, `data-item="`+late+`"`)
		if n := strings.Count(p.Body, `badge item-sent`); n != 3 {
			t.Fatalf("%d sent items, want 3", n)
		}
		if !e.logs.HasAudit(map[string]string{"token": "ops", "action": "replay_job.create", "job_id": real, "result": "ok"}) {
			t.Fatalf("no audit line of the job: %v", e.logs.Audits())
		}
		ops.post("/console/replay-jobs/"+real+"/run", url.Values{"csrf": {csrf}}).
			wantStatus(t, http.StatusConflict).wantBody(t, "Only a dry run that completed")

		ops.get("/console/replay-jobs").wantStatus(t, http.StatusOK).
			wantBody(t, `data-job="`+dry+`"`, `data-job="`+real+`"`, "dry run", "100 %")
	})
}

func TestCancelAndReadOnlyJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.deadLetter(t, newCallout("crm-api", "k-a", "application/json", []byte(`{}`)), "no")
		ops := e.browser(t)
		csrf := ops.login(writeToken)
		p := ops.post("/console/replay-jobs", url.Values{"csrf": {csrf}, "endpoint": {"crm-api"}}).
			wantStatus(t, http.StatusSeeOther)
		id := jobIDOf.FindStringSubmatch(p.Header.Get("Location"))[1]

		viewer := e.browser(t)
		vcsrf := viewer.login(readToken)
		viewer.get("/console/replay-jobs/"+id).wantStatus(t, http.StatusOK).wantNoBody(t, "Cancel the job")
		viewer.post("/console/replay-jobs/"+id+"/cancel", url.Values{"csrf": {vcsrf}}).
			wantStatus(t, http.StatusForbidden).wantBody(t, "scope read")
		viewer.post("/console/replay-jobs", url.Values{"csrf": {vcsrf}, "endpoint": {"crm-api"}}).
			wantStatus(t, http.StatusForbidden)

		ops.post("/console/replay-jobs/"+id+"/cancel", url.Values{"csrf": {csrf}}).wantStatus(t, http.StatusSeeOther)
		j, err := e.svc.Job(ctxT(t), id)
		if err != nil || (j.State != policy.JobCancelled && j.State != policy.JobCancelling) {
			t.Fatalf("after cancel: %+v, %v", j, err)
		}
		ops.get("/console/replay-jobs/"+id).wantBody(t, "Cancelled</dt><dd>by ops")
		ops.get("/console/replay-jobs/nope").wantStatus(t, http.StatusNotFound)
		ops.post("/console/replay-jobs", url.Values{"csrf": {csrf}, "endpoint": {"crm-api"}, "rate": {"5000"}}).
			wantStatus(t, http.StatusBadRequest).wantBody(t, "rate 5000")
	})
}
