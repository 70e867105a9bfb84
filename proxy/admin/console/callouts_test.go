package console_test

import (
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
)

func TestCalloutsPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		dl := e.deadLetter(t, newCallout("crm-api", "key-of-crm", "application/json", []byte(`{}`)), "no")
		res, err := e.store.Enqueue(ctxT(t), newCallout("pay-api", "key-pending", "application/json", []byte(`{}`)),
			policy.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := e.browser(t)
		b.login(readToken)

		b.get("/console/callouts").wantStatus(t, http.StatusOK).
			wantBody(t, `name="id"`, `name="key"`, `<option value="held" selected>`)
		p := b.get("/console/callouts?id="+dl).wantStatus(t, http.StatusSeeOther)
		b.get(p.Header.Get("Location")).wantStatus(t, http.StatusOK).wantBody(t, "<h1>Dead letter "+dl+"</h1>")

		p = b.get("/console/callouts?endpoint=crm-api&key=key-of-crm").wantStatus(t, http.StatusSeeOther)
		if p.Header.Get("Location") != "/console/callouts/"+dl {
			t.Fatalf("key lookup: Location %q", p.Header.Get("Location"))
		}
		b.get("/console/callouts?endpoint=crm-api&key=never-used").wantStatus(t, http.StatusNotFound).
			wantBody(t, "no callout of crm-api holds Idempotency-Key")

		b.get("/console/callouts?endpoint=pay-api&state=scheduled").wantStatus(t, http.StatusOK).
			wantBody(t, "scheduled callouts of pay-api", `data-callout="`+res.ID+`"`, "key-pending",
				`data-waiting="1" data-in-flight="0"`)
		b.get("/console/callouts?endpoint=pay-api&state=held").wantStatus(t, http.StatusOK).
			wantNoBody(t, `data-callout="`+res.ID+`"`)
		b.get("/console/callouts?endpoint=pay-api&state=bored").wantStatus(t, http.StatusBadRequest).
			wantBody(t, "state must be scheduled, held or in_flight")

		// An open breaker holds it.
		e.failures(t, "pay-api", 3)
		b.get("/console/callouts?endpoint=pay-api&state=held").wantStatus(t, http.StatusOK).
			wantBody(t, `data-callout="`+res.ID+`"`, `data-waiting="4" data-in-flight="0"`)
		b.get("/console/callouts/"+res.ID).wantStatus(t, http.StatusOK).
			wantBody(t, "<h1>Callout "+res.ID+"</h1>", "state-held", "<dt>Held by</dt>").
			wantNoBody(t, "Replay this dead letter")
		// Which gate holds it, in the words of held_by (contract §12): the
		// open breaker, and whose it is.
		b.get("/console/callouts/"+res.ID).wantBody(t, `data-held-by="breaker_open `)
		b.get("/console/callouts/nope").wantStatus(t, http.StatusNotFound)
	})
}
