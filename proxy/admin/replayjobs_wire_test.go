package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// TestCreateJobWire: the body of POST /admin/v1/replay-jobs reaches the
// replay service as the same spec, and the job comes back as exactly the
// document calloutctl decodes (field names, omitted empties, times in UTC).
func TestCreateJobWire(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	body := `{"filters":[{"endpoints":["pay-api"],"since":"2026-03-01T10:00:00+01:00","statuses":[503,0],` +
		`"reasons":["exhausted"]}],"ids":["00AAAAAAAAAAAAAAAAAAAAAA"],"dry_run":true,"rate":200}`
	wantSpec := replay.Spec{Filters: []replay.Filter{{Endpoints: []string{"pay-api"},
		Since:    time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
		Statuses: []int{503, 0}, Reasons: []policy.DeadLetterReason{policy.DeadLetterExhausted}}},
		IDs: []string{"00AAAAAAAAAAAAAAAAAAAAAA"}, DryRun: true, Rate: 200}
	var stored policy.ReplayJob
	e := newFakeEnv(t, nil, &fakeReplayJobs{
		CreateJobFn: func(_ context.Context, sp replay.Spec, by string) (policy.ReplayJob, error) {
			if !sp.Filters[0].Since.Equal(wantSpec.Filters[0].Since) {
				t.Errorf("since = %s, want %s", sp.Filters[0].Since, wantSpec.Filters[0].Since)
			}
			sp.Filters[0].Since = wantSpec.Filters[0].Since // the same instant, compared above
			if !reflect.DeepEqual(sp, wantSpec) || by != "ops" {
				t.Errorf("CreateJob(%+v, %q), want %+v by ops", sp, by, wantSpec)
			}
			sp.Filters[0].Until = at // as the service fills it
			b, _ := json.Marshal(sp)
			stored = policy.ReplayJob{ID: "job-1", Spec: string(b), State: policy.JobQueued,
				CreatedBy: by, CreatedAt: at, UpdatedAt: at}
			return stored, nil
		},
		JobFn: func(context.Context, string) (policy.ReplayJob, error) {
			j := stored
			j.State, j.Phase, j.StartedAt, j.FinishedAt = policy.JobCompleted, policy.PhaseSend, at, at.Add(time.Second)
			j.Total, j.Sent, j.Skipped, j.Refused, j.Failed = 7, 3, 2, 1, 1
			return j, nil
		},
	})
	w := e.do(t, "POST", "/admin/v1/replay-jobs", dltWrite, body)
	want := `{"id":"job-1","state":"queued","dry_run":true,"rate":200,"filters":[{"endpoints":["pay-api"],` +
		`"since":"2026-03-01T09:00:00Z","until":"2026-03-02T09:00:00Z","statuses":[503,0],"reasons":["exhausted"]}],` +
		`"id_count":1,"created_by":"ops","created_at":"2026-03-02T09:00:00Z","updated_at":"2026-03-02T09:00:00Z",` +
		`"total":0,"done":0,"sent":0,"would_send":0,"skipped":0,"refused":0,"failed":0}` + "\n"
	if w.Code != http.StatusCreated || w.Body.String() != want || w.Header().Get("Location") != "/admin/v1/replay-jobs/job-1" {
		t.Fatalf("create = %d %s (Location %q)\nwant 201 %s", w.Code, w.Body, w.Header().Get("Location"), want)
	}
	// A job that ended has no phase; done sums the handled items.
	w = e.do(t, "GET", "/admin/v1/replay-jobs/job-1", dltRead, "")
	var got api.ReplayJob
	dltDecode(t, w, http.StatusOK, &got)
	if got.Phase != "" || got.Done != 7 || got.State != policy.JobCompleted || got.FinishedAt == nil ||
		!strings.Contains(w.Body.String(), `"started_at":"2026-03-02T09:00:00Z","finished_at":"2026-03-02T09:00:01Z"`) {
		t.Fatalf("job = %s", w.Body)
	}
}

// TestJobDocUnreadableSpec: a stored job whose spec cannot be read shows
// replay.UnreadableSpec as its error, unless it has one of its own.
func TestJobDocUnreadableSpec(t *testing.T) {
	bad := policy.ReplayJob{ID: "j", Spec: "{not json", State: policy.JobFailed}
	if d := jobDoc(bad); d.Error != replay.UnreadableSpec || d.Rate != 0 || d.Filters != nil {
		t.Fatalf("jobDoc = %+v, want the unreadable-spec error", d)
	}
	bad.Error = "more than 100000 dead letters match; narrow the filters"
	if d := jobDoc(bad); d.Error != bad.Error {
		t.Fatalf("jobDoc error = %q, want the job's own %q", d.Error, bad.Error)
	}
}

// TestReplayFilterWire: the wire filter and the replay service's (kept in
// the stored spec) encode the same filter to the same bytes.
func TestReplayFilterWire(t *testing.T) {
	f := replay.Filter{Endpoints: []string{"a", "b"}, Since: time.UnixMilli(1_700_000_000_000).UTC(),
		Statuses: []int{0, 429}, Reasons: []policy.DeadLetterReason{policy.DeadLetterAmbiguous}, Unresolved: true}
	for _, f := range []replay.Filter{f, {}} {
		a, _ := json.Marshal(api.ReplayFilter(f))
		b, _ := json.Marshal(f)
		if string(a) != string(b) {
			t.Fatalf("api.ReplayFilter %s, replay.Filter %s", a, b)
		}
	}
}
