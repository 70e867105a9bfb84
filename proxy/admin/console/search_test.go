package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// searchFixture makes a dead letter on each endpoint with its own key, path
// and source record; it returns the pay-api and crm-api ids.
func searchFixture(t *testing.T, e *env) (pay, crm string) {
	pay = e.deadLetter(t, newCallout("pay-api", "k-pay", "application/json", []byte(`{}`)), "no")
	nc := newCallout("crm-api", "k-crm", "application/json", []byte(`{}`))
	nc.Path, nc.SourceRecord = "/v2/orders/77", "003000000000002BBB"
	crm = e.deadLetter(t, nc, "no")
	return pay, crm
}

func TestSearchAcrossEndpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		pay, crm := searchFixture(t, e)
		b := e.browser(t)
		b.login(readToken)
		row := func(id string) string { return `data-dead-letter="` + id + `"` }

		b.get("/console/dead-letters").wantStatus(t, http.StatusOK).wantBody(t, `data-total="2"`, row(pay), row(crm))
		for name, q := range map[string]string{"Idempotency-Key": "k-crm", "path": "/v2/orders", "source record": "003000000000002BBB"} {
			t.Run(name, func(t *testing.T) {
				b.get("/console/dead-letters?q="+q).wantStatus(t, http.StatusOK).
					wantBody(t, `data-total="1"`, row(crm)).wantNoBody(t, row(pay))
			})
		}
		// The key's holder on any endpoint, in any organisation.
		b.get("/console/dead-letters?q=k-pay").wantBody(t, "Callouts holding Idempotency-Key <code>k-pay</code>",
			`data-key-holder="`+pay+`"`, "pay-api · organisation "+issuer)
		b.get("/console/dead-letters?q=nobody").wantBody(t, `data-total="0"`, "None on any endpoint", "No dead letter matches.")
		// The header's search box goes to the same page.
		b.get("/console/endpoints").wantBody(t, `<form method="get" action="/console/dead-letters" class="search" role="search">`)
	})
}

func TestSortAndTotals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		pay, crm := searchFixture(t, e)
		b := e.browser(t)
		b.login(readToken)
		order := func(p page) (int, int) {
			return strings.Index(p.Body, `data-dead-letter="`+pay+`"`), strings.Index(p.Body, `data-dead-letter="`+crm+`"`)
		}
		p := b.get("/console/dead-letters?sort=endpoint").wantStatus(t, http.StatusOK).
			wantBody(t, `href="/console/dead-letters?sort=-endpoint"`, "Endpoint ▲")
		if i, j := order(p); i < 0 || j < 0 || j > i {
			t.Fatalf("sort=endpoint: crm-api (%d) must come before pay-api (%d)", j, i)
		}
		p = b.get("/console/dead-letters?sort=-endpoint").wantBody(t, "Endpoint ▼", `href="/console/dead-letters?sort=endpoint"`)
		if i, j := order(p); i > j {
			t.Fatalf("sort=-endpoint: pay-api (%d) must come before crm-api (%d)", i, j)
		}
		b.get("/console/dead-letters?sort=colour").wantStatus(t, http.StatusBadRequest).wantBody(t, "sort must be dead_lettered_at")

		// The API pages a sorted search by offset with its total.
		var doc api.SearchDoc
		proctest.GetJSON(t, http.DefaultClient, e.srv.URL+"/admin/v1/search?sort=-endpoint&limit=1", "Bearer "+readToken, &doc)
		if doc.Total != 2 || len(doc.DeadLetters) != 1 || doc.DeadLetters[0].ID != pay || doc.NextOffset != 1 {
			t.Fatalf("search page: %+v, want total 2, pay-api first, next offset 1", doc)
		}
	})
}
