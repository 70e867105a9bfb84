package console_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestCountsAgreeWithTheirWords: a total of one reads in the singular
// ("1 dead letter matches"), any other in the plural, on the dead-letter
// list, an endpoint's totals and a bulk action's confirmation.
func TestCountsAgreeWithTheirWords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		pay, _ := searchFixture(t, e)
		e.stats.DeadLetter("crm-api", 1)
		if err := e.stats.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		b := e.browser(t)
		csrf := b.login(writeToken)
		b.get("/console/dead-letters").wantStatus(t, http.StatusOK).wantBody(t, "</strong> dead letters match;")
		b.get("/console/dead-letters?q=k-crm").wantStatus(t, http.StatusOK).
			wantBody(t, "<strong>1</strong> dead letter matches;").wantNoBody(t, "dead letters match")
		b.get("/console/dead-letters?q=nobody").wantBody(t, "<strong>0</strong> dead letters match.")
		b.get("/console/endpoints/crm-api").wantStatus(t, http.StatusOK).
			wantBody(t, `<strong data-total="dead-letters">1</strong> dead letter.`)
		b.post("/console/dead-letters/bulk", url.Values{"csrf": {csrf}, "action": {"replay"}, "id": {pay}}).
			wantStatus(t, http.StatusOK).wantBody(t, "Replay 1 dead letter<", "Replay this dead letter</button>").
			wantNoBody(t, "1 dead letters")
	})
}
