package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

func TestDeadLetterRoutesAuth(t *testing.T) {
	forEachDLT(t, func(t *testing.T, e *dltEnv) {
		id := e.seed(t, "pay-api", "k1", 503)
		tests := []struct {
			name, method, path, token string
			want                      int
			action                    string // the audit line expected, "" for none
		}{
			{"no token", "GET", "/admin/v1/dead-letters", "", 401, ""},
			{"read lists", "GET", "/admin/v1/dead-letters", dltRead, 200, ""},
			{"read gets", "GET", "/admin/v1/dead-letters/" + id, dltRead, 200, ""},
			{"read gets a callout", "GET", "/admin/v1/callouts/" + id, dltRead, 200, ""},
			{"read cannot replay", "POST", "/admin/v1/dead-letters/" + id + "/replay", dltRead, 403, "replay"},
			{"read cannot discard", "DELETE", "/admin/v1/dead-letters/" + id, dltRead, 403, "discard"},
			{"read cannot create a job", "POST", "/admin/v1/replay-jobs", dltRead, 403, "replay_job.create"},
			{"read cannot cancel", "POST", "/admin/v1/replay-jobs/x/cancel", dltRead, 403, "replay_job.cancel"},
			{"unknown token cannot replay", "POST", "/admin/v1/dead-letters/" + id + "/replay", "nope-nope-nope-nope", 401, "replay"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := len(e.audits(t))
				w := e.do(t, tt.method, tt.path, tt.token, `{"ids":["`+id+`"]}`)
				if w.Code != tt.want {
					t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
				}
				a := e.audits(t)[before:]
				if tt.action == "" {
					if len(a) != 0 {
						t.Fatalf("a read was audit-logged: %v", a)
					}
					return
				}
				wantToken, wantResult := "viewer", auth.AuditResult(problem.Forbidden)
				if tt.token != dltRead {
					wantToken, wantResult = "", auth.AuditResult(problem.Unauthorized)
				}
				if len(a) != 1 || a[0]["action"] != tt.action || a[0]["token"] != wantToken || a[0]["result"] != wantResult {
					t.Fatalf("audit = %v, want one %s line by %q, %s", a, tt.action, wantToken, wantResult)
				}
			})
		}
		if c, _, _ := e.svc.DeadLetter(t.Context(), id); c == nil {
			t.Fatal("a refused request changed the dead letter")
		}
	})
}

func TestDeadLetterListAndGetRedacted(t *testing.T) {
	forEachDLT(t, func(t *testing.T, e *dltEnv) {
		a := e.seed(t, "pay-api", "k1", 503)
		e.clk.Advance(time.Minute)
		b := e.seed(t, "pay-api", "k2", 400)
		c := e.seed(t, "crm-api", "k3", 503)
		tests := []struct {
			query string
			want  []string
		}{
			{"", []string{c, a, b}},
			{"?endpoint=pay-api", []string{a, b}},
			{"?status=503", []string{c, a}},
			{"?endpoint=pay-api,crm-api&status=400&reason=permanent", []string{b}},
			{"?since=" + e.clk.Now().UTC().Format(time.RFC3339Nano), []string{c, b}},
			{"?until=" + e.clk.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano), []string{a}},
			{"?reason=exhausted", nil},
		}
		for _, tt := range tests {
			var got []string
			cursor := ""
			for range 5 {
				var list api.DeadLetterList
				dltDecode(t, e.do(t, "GET", "/admin/v1/dead-letters"+tt.query+sep(tt.query)+"limit=1&cursor="+cursor, dltRead, ""), 200, &list)
				for _, d := range list.Items {
					got = append(got, d.ID)
					if strings.Contains(d.LastError, "leaked-token") {
						t.Fatalf("last error not redacted: %q", d.LastError)
					}
				}
				if cursor = list.NextCursor; cursor == "" {
					break
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("%q: got %v, want %v", tt.query, got, tt.want)
			}
		}
		var doc api.CalloutDoc
		dltDecode(t, e.do(t, "GET", "/admin/v1/dead-letters/"+a, dltRead, ""), 200, &doc)
		req := doc.Request
		if req.Headers.Get("X-Card-Token") != redact.Mask || req.Query != "api_key="+redact.Mask+"&x=1" ||
			req.Body != `{"card":{"number":"`+redact.Mask+`"},"amount":5}` || req.BodyBytes != len(dltBody) {
			t.Fatalf("request not redacted: %+v", req)
		}
		if doc.State != "dead_lettered" || len(doc.Attempts) != 1 || doc.Response == nil ||
			doc.Response.Headers.Get("Set-Cookie") != redact.Mask || doc.FinishedAt == nil || doc.IdempotencyKey != "k1" {
			t.Fatalf("document = %+v", doc)
		}
		for _, q := range []string{"?since=yesterday", "?status=abc", "?status=999", "?reason=nope", "?endpoint=Bad_Name", "?cursor=zz", "?limit=-1"} {
			wantProblem(t, e.do(t, "GET", "/admin/v1/dead-letters"+q, dltRead, ""), problem.InvalidRequest)
		}
		wantProblem(t, e.do(t, "GET", "/admin/v1/dead-letters/00AAAAAAAAAAAAAAAAAAAAAA", dltRead, ""), problem.NotFound)
	})
}

// sep is the separator before one more query parameter.
func sep(q string) string {
	if q == "" {
		return "?"
	}
	return "&"
}

func TestReplayRoute(t *testing.T) {
	forEachDLT(t, func(t *testing.T, e *dltEnv) {
		id := e.seed(t, "pay-api", "k1", 503)
		w := e.do(t, "POST", "/admin/v1/dead-letters/"+id+"/replay", dltWrite, "")
		var res api.ReplayResultDoc
		dltDecode(t, w, http.StatusAccepted, &res)
		if !res.Created || res.ReplayID == "" || res.State != "scheduled" ||
			w.Header().Get("Location") != "/admin/v1/callouts/"+res.ReplayID {
			t.Fatalf("replay = %+v (Location %q)", res, w.Header().Get("Location"))
		}
		var again api.ReplayResultDoc
		dltDecode(t, e.do(t, "POST", "/admin/v1/dead-letters/"+id+"/replay", dltWrite, ""), http.StatusOK, &again)
		if again.Created || again.ReplayID != res.ReplayID {
			t.Fatalf("second replay = %+v", again)
		}
		var chain api.CalloutDoc
		dltDecode(t, e.do(t, "GET", "/admin/v1/callouts/"+res.ReplayID, dltRead, ""), http.StatusOK, &chain)
		if chain.ReplayOf != id || chain.IdempotencyKey != "k1" || chain.State != "scheduled" {
			t.Fatalf("chain = %+v", chain)
		}
		var dl api.CalloutDoc
		dltDecode(t, e.do(t, "GET", "/admin/v1/dead-letters/"+id, dltRead, ""), http.StatusOK, &dl)
		if dl.ReplayedBy != res.ReplayID || dl.ReplayedAt == nil {
			t.Fatalf("dead letter after replay = %+v", dl)
		}
		// A disabled endpoint refuses until it is re-enabled.
		other := e.seed(t, "crm-api", "k9", 503)
		if _, err := e.store.Disable(t.Context(), "crm-api", "test"); err != nil {
			t.Fatal(err)
		}
		wantProblem(t, e.do(t, "POST", "/admin/v1/dead-letters/"+other+"/replay", dltWrite, ""), problem.EndpointDisabled)
		if err := e.store.Enable(t.Context(), "crm-api"); err != nil {
			t.Fatal(err)
		}
		dltDecode(t, e.do(t, "POST", "/admin/v1/dead-letters/"+other+"/replay", dltWrite, ""), http.StatusAccepted, &res)
		wantProblem(t, e.do(t, "POST", "/admin/v1/dead-letters/"+res.ReplayID+"/replay", dltWrite, ""), problem.NotFound)

		var results []string
		for _, a := range e.audits(t) {
			if a["action"] != "replay" || a["token"] != "ops" {
				t.Fatalf("audit line = %v", a)
			}
			results = append(results, a["result"].(string))
		}
		want := "replayed,already_replayed,endpoint_disabled,replayed,not_found"
		if strings.Join(results, ",") != want {
			t.Fatalf("audit results %v, want %s", results, want)
		}
	})
}

func TestDiscardRoute(t *testing.T) {
	forEachDLT(t, func(t *testing.T, e *dltEnv) {
		id := e.seed(t, "pay-api", "k1", 503)
		if w := e.do(t, "DELETE", "/admin/v1/dead-letters/"+id, dltWrite, ""); w.Code != http.StatusNoContent {
			t.Fatalf("discard = %d %s", w.Code, w.Body)
		}
		wantProblem(t, e.do(t, "GET", "/admin/v1/dead-letters/"+id, dltRead, ""), problem.NotFound)
		wantProblem(t, e.do(t, "DELETE", "/admin/v1/dead-letters/"+id, dltWrite, ""), problem.NotFound)
		a := e.audits(t)
		if len(a) != 2 || a[0]["result"] != "ok" || a[1]["result"] != "not_found" || a[0]["token"] != "ops" ||
			a[0]["dead_letter_id"] != id {
			t.Fatalf("audit = %v", a)
		}
	})
}

func TestReplayJobRoutes(t *testing.T) {
	forEachDLT(t, func(t *testing.T, e *dltEnv) {
		ids := []string{e.seed(t, "pay-api", "k1", 503), e.seed(t, "pay-api", "k2", 503), e.seed(t, "crm-api", "k3", 500)}
		body := `{"filters":[{"endpoints":["pay-api"],"statuses":[503]}],"ids":["` + ids[1] + `","` + ids[2] + `"],"rate":200}`
		w := e.do(t, "POST", "/admin/v1/replay-jobs", dltWrite, body)
		var job api.ReplayJob
		dltDecode(t, w, http.StatusCreated, &job)
		if job.State != "queued" || job.Rate != 200 || job.IDCount != 2 || job.CreatedBy != "ops" ||
			len(job.Filters) != 1 || !job.Filters[0].Until.Equal(e.clk.Now()) ||
			w.Header().Get("Location") != "/admin/v1/replay-jobs/"+job.ID {
			t.Fatalf("created = %+v", job)
		}
		e.svc.RunJob(t.Context(), job.ID)
		dltDecode(t, e.do(t, "GET", "/admin/v1/replay-jobs/"+job.ID, dltRead, ""), http.StatusOK, &job)
		if job.State != "completed" || job.Total != 3 || job.Sent != 3 || job.Done != 3 || job.FinishedAt == nil {
			t.Fatalf("job = %+v", job)
		}
		var items api.ReplayJobItems
		dltDecode(t, e.do(t, "GET", "/admin/v1/replay-jobs/"+job.ID+"/items?limit=2", dltRead, ""), http.StatusOK, &items)
		if len(items.Items) != 2 || items.NextOffset != 2 || items.Items[0].Status != "sent" ||
			items.Items[0].ReplayID == "" || items.Items[0].DeadLetter == nil || items.Items[0].DeadLetter.ReplayedBy == "" {
			t.Fatalf("items = %+v", items)
		}
		var list api.ReplayJobList
		dltDecode(t, e.do(t, "GET", "/admin/v1/replay-jobs", dltRead, ""), http.StatusOK, &list)
		if len(list.Jobs) != 1 || list.Jobs[0].ID != job.ID {
			t.Fatalf("list = %+v", list)
		}
		dltDecode(t, e.do(t, "POST", "/admin/v1/replay-jobs/"+job.ID+"/cancel", dltWrite, ""), http.StatusOK, &job)
		if job.State != "completed" {
			t.Fatalf("cancel of a completed job = %+v", job)
		}
		// A queued job is cancelled at once.
		dltDecode(t, e.do(t, "POST", "/admin/v1/replay-jobs", dltWrite, `{"ids":["`+ids[0]+`"]}`), http.StatusCreated, &job)
		dltDecode(t, e.do(t, "POST", "/admin/v1/replay-jobs/"+job.ID+"/cancel", dltWrite, ""), http.StatusAccepted, &job)
		if job.State != "cancelled" || job.CancelledBy != "ops" {
			t.Fatalf("cancelled = %+v", job)
		}
		for _, bad := range []string{`{"ids":[]}`, `{"ids":["x"]}`, `{"filters":[{}],"rate":5000}`, `{"filter":{}}`, `{"ids":[]} {}`, `nope`} {
			wantProblem(t, e.do(t, "POST", "/admin/v1/replay-jobs", dltWrite, bad), problem.InvalidRequest)
		}
		wantProblem(t, e.do(t, "GET", "/admin/v1/replay-jobs/AAAAAAAAAAAAAAAAAAAAAA", dltRead, ""), problem.NotFound)
		wantProblem(t, e.do(t, "POST", "/admin/v1/replay-jobs/AAAAAAAAAAAAAAAAAAAAAA/cancel", dltWrite, ""), problem.NotFound)
		var creates, cancels int
		for _, a := range e.audits(t) {
			switch a["action"] {
			case "replay_job.create":
				creates++
			case "replay_job.cancel":
				cancels++
			case "replay":
				if a["job_id"] == "" || a["token"] != "ops" {
					t.Fatalf("job replay audit = %v", a)
				}
			}
		}
		if creates != 8 || cancels != 3 {
			t.Fatalf("audited %d creates and %d cancels, want 8 and 3", creates, cancels)
		}
	})
}
