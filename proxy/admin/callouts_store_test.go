package admin

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// TestListPendingCalloutsOnTheStore: GET /admin/v1/callouts pages an endpoint's
// pending callouts by state with a read token, on the real store; a missing
// or unknown endpoint, a missing or finished state, a malformed cursor and
// a limit past 1000 are refused.
func TestListPendingCalloutsOnTheStore(t *testing.T) {
	forEachDLT(t, func(t *testing.T, e *dltEnv) {
		for _, k := range []string{"a", "b", "c"} {
			if _, err := e.store.Enqueue(t.Context(), policy.NewCallout{Endpoint: "pay-api", Issuer: "iss",
				Method: "POST", Path: "/v1/charges", IdempotencyKey: k, Body: []byte("{}")},
				policy.EnqueueOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			q := url.Values{"endpoint": {"pay-api"}, "state": {"scheduled"}, "limit": {"2"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var l api.CalloutList
			dltDecode(t, e.do(t, "GET", "/admin/v1/callouts?"+q.Encode(), dltRead, ""), http.StatusOK, &l)
			for _, c := range l.Items {
				if c.State != policy.Scheduled || c.Endpoint != "pay-api" || c.Method != "POST" || c.IdempotencyKey == "" {
					t.Fatalf("item = %+v", c)
				}
				ids = append(ids, c.ID)
			}
			if cursor = l.NextCursor; cursor == "" {
				break
			}
			if pages > 3 {
				t.Fatal("too many pages")
			}
		}
		if len(ids) != 3 {
			t.Fatalf("listed %v, want 3 callouts", ids)
		}
		var held api.CalloutList
		dltDecode(t, e.do(t, "GET", "/admin/v1/callouts?endpoint=pay-api&state=held", dltRead, ""), http.StatusOK, &held)
		if len(held.Items) != 0 {
			t.Fatalf("held while the gate is open: %+v", held.Items)
		}
		if w := e.do(t, "GET", "/admin/v1/callouts?endpoint=pay-api", "", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("no token: %d", w.Code)
		}
		for query, code := range map[string]problem.Code{
			"":                                        problem.InvalidRequest,
			"?endpoint=nosuch&state=held":             problem.UnknownEndpoint,
			"?endpoint=pay-api&state=failed":          problem.InvalidRequest,
			"?endpoint=pay-api&limit=1001":            problem.InvalidRequest,
			"?endpoint=pay-api&cursor=garble":         problem.InvalidRequest,
			"?endpoint=pay-api&state=held&cursor=d:x": problem.InvalidRequest,
			"?endpoint=pay-api":                       problem.InvalidRequest, // the state is required
		} {
			wantProblem(t, e.do(t, "GET", "/admin/v1/callouts"+query, dltRead, ""), code)
		}
	})
}
