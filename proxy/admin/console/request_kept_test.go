package console_test

import (
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestFinishedCalloutSaysItsRequestIsNotKept: a succeeded callout's page
// says its request's headers and body are not kept (contract §5), not
// "0 body bytes stored"; a dead letter's shows its request as received.
func TestFinishedCalloutSaysItsRequestIsNotKept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := newCallout("crm-api", "k-ok", "application/json", []byte(`{"a":1}`))
		if _, err := e.store.Enqueue(ctxT(t), nc, policy.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
		ok := e.completeNext(t, "crm-api", policy.Completion{Action: policy.ActionSucceed,
			Attempt:  &policy.Attempt{StartedAt: e.clk.Now(), Status: 200, Outcome: policy.Success},
			Response: &policy.Response{Status: 200, Body: []byte(`{}`)}})
		dead := e.deadLetter(t, newCallout("crm-api", "k-dead", "application/json", []byte(`{"a":2}`)), "no")
		b := e.browser(t)
		b.login(readToken)
		b.get("/console/callouts/"+ok).wantStatus(t, http.StatusOK).
			wantBody(t, `data-request="not-kept"`, "<code>POST /v1/items</code>: its headers and body are not kept once the callout succeeded").
			wantNoBody(t, "body bytes stored", "Request as received")
		b.get("/console/dead-letters/"+dead).wantStatus(t, http.StatusOK).
			wantBody(t, "Request as received", "7 body bytes stored", `data-body="request"`).wantNoBody(t, `data-request="not-kept"`)
	})
}
