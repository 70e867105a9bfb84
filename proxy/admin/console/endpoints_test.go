package console_test

import (
	"net/http"
	"net/url"
	"testing"
)

func TestEndpointsPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.failures(t, "pay-api", 3)
		ops := e.browser(t)
		ops.login(writeToken)
		p := ops.get("/console/endpoints").wantStatus(t, http.StatusOK)
		p.wantBody(t, `data-refresh="3"`, `<tr data-endpoint="crm-api">`, `<tr data-endpoint="pay-api">`,
			`data-gate="breaker_open">breaker_open</span>`, `data-breaker="open"`, "probe in 5m0s", "3 <span class=\"sub\">of 3</span>",
			`<td class="num">3</td>`, // backlog items
			`href="/console/endpoints/pay-api/disable"`, `href="/console/endpoints/pay-api/reset"`)

		viewer := e.browser(t)
		viewer.login(readToken)
		viewer.get("/console/endpoints").wantStatus(t, http.StatusOK).
			wantBody(t, `data-gate="breaker_open">breaker_open</span>`, `data-breaker="open"`, `<span class="scope scope-read">read</span>`).
			wantNoBody(t, "<th>Actions</th>", "/disable", "/reset", "/enable")
	})
}

// TestEndpointsPageShowsPartitions: crm-api's breaker is partitioned by
// organisation; one organisation's failures open its partition, shown
// under the endpoint's own breaker, which stays closed.
func TestEndpointsPageShowsPartitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.failures(t, "crm-api", 3)
		b := e.browser(t)
		b.login(readToken)
		b.get("/console/endpoints").wantStatus(t, http.StatusOK).
			wantBody(t, `data-partition="`+issuer+`"`, `<span data-partition-breaker="open">open</span> · probe in 5m0s · 3 failures`,
									"endpoint's; per organisation:").
			wantNoBody(t, "every organisation closed") // crm-api has an open one; pay-api has no partitions
		b.get("/console/endpoints/crm-api").wantStatus(t, http.StatusOK).
			wantBody(t, "<dt>Breaker of "+issuer+"</dt>", `<span data-partition-breaker="open">open</span>`,
				"partitioned by organisation", `data-gate="open">open</span>`)
	})
}

func TestEndpointActions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.failures(t, "pay-api", 3)
		ops := e.browser(t)
		csrf := ops.login(writeToken)

		t.Run("the confirmation page says what will happen", func(t *testing.T) {
			ops.get("/console/endpoints/pay-api/disable").wantStatus(t, http.StatusOK).
				wantBody(t, "every pending callout becomes a dead letter", "3 pending",
					`action="/console/endpoints/pay-api/disable"`, `name="csrf" value="`+csrf+`"`)
			ops.get("/console/endpoints/pay-api/explode").wantStatus(t, http.StatusNotFound)
			ops.get("/console/endpoints/no-such/disable").wantStatus(t, http.StatusNotFound).
				wantBody(t, `no endpoint &#34;no-such&#34; is configured`)
		})
		t.Run("a read-scope token is refused by the API, and audited", func(t *testing.T) {
			viewer := e.browser(t)
			vcsrf := viewer.login(readToken)
			viewer.get("/console/endpoints/pay-api/reset").wantStatus(t, http.StatusOK).
				wantBody(t, "scope read: it cannot do this").wantNoBody(t, `<form method="post" action="/console/endpoints`)
			viewer.post("/console/endpoints/pay-api/reset", url.Values{"csrf": {vcsrf}}).
				wantStatus(t, http.StatusForbidden).wantBody(t, "&#34;viewer&#34; has scope read; this action needs write")
			if !e.logs.HasAudit(map[string]string{"token": "viewer", "action": "breaker_reset", "result": "forbidden"}) {
				t.Fatalf("no audit line of the refused reset: %v", e.logs.Audits())
			}
		})
		t.Run("reset closes the breaker", func(t *testing.T) {
			p := ops.post("/console/endpoints/pay-api/reset", url.Values{"csrf": {csrf}, "reason": {"fixed"}}).
				wantStatus(t, http.StatusSeeOther)
			ops.get(p.Header.Get("Location")).wantStatus(t, http.StatusOK).
				wantBody(t, "Reset the breaker of pay-api: done.", `data-gate="open">open</span>`, `data-breaker="closed"`)
			if !e.logs.HasAudit(map[string]string{"token": "ops", "action": "breaker_reset", "result": "ok",
				"endpoint": "pay-api", "reason": "fixed"}) {
				t.Fatalf("no audit line of the reset: %v", e.logs.Audits())
			}
		})
		t.Run("disable dead-letters the backlog, enable undoes it", func(t *testing.T) {
			p := ops.post("/console/endpoints/pay-api/disable", url.Values{"csrf": {csrf}, "reason": {"maintenance"}}).
				wantStatus(t, http.StatusSeeOther)
			ops.get(p.Header.Get("Location")).wantBody(t, "Disable pay-api: done; 3 pending callouts became dead letters.",
				`data-gate="disabled">disabled</span>`, "admin ops: maintenance", `href="/console/endpoints/pay-api/enable"`)
			st, err := e.store.EndpointState(ctxT(t), "pay-api")
			if err != nil || !st.Disabled || st.DeadLetters != 3 {
				t.Fatalf("after disable: %+v, %v", st, err)
			}
			p = ops.post("/console/endpoints/pay-api/enable", url.Values{"csrf": {csrf}}).wantStatus(t, http.StatusSeeOther)
			ops.get(p.Header.Get("Location")).wantBody(t, "Enable pay-api: done.", `data-gate="open">open</span>`, `data-breaker="closed"`)
		})
		t.Run("a notice names only a configured endpoint", func(t *testing.T) {
			ops.get("/console/endpoints?done=disable&endpoint=<b>x</b>&changed=1").wantStatus(t, http.StatusOK).
				wantNoBody(t, "Disable &lt;b&gt;", "<b>x</b>")
		})
	})
}
