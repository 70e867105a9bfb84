package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestDeadLettersPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		pay := e.deadLetter(t, newCallout("pay-api", "k-pay", "application/json", []byte(`{"a":1}`)), "no")
		crm := e.deadLetter(t, newCallout("crm-api", "k-crm", "application/json", []byte(`{"b":2}`)), "no")
		b := e.browser(t)
		b.login(readToken)

		b.get("/console/dead-letters").wantStatus(t, http.StatusOK).
			wantBody(t, `data-dead-letter="`+pay+`"`, `data-dead-letter="`+crm+`"`, "not replayed",
								`<option value="pay-api">pay-api</option>`).
			wantNoBody(t, "Replay this filter") // read scope
		b.get("/console/dead-letters?endpoint=crm-api").wantStatus(t, http.StatusOK).
			wantBody(t, `data-dead-letter="`+crm+`"`, `<option value="crm-api" selected>`).
			wantNoBody(t, `data-dead-letter="`+pay+`"`)
		b.get("/console/dead-letters?status=503").wantStatus(t, http.StatusOK).
			wantNoBody(t, `data-dead-letter="`+pay+`"`, `data-dead-letter="`+crm+`"`)
		b.get("/console/dead-letters?reason=permanent&status=422&since=2023-11-14T00:00&until=2023-11-15").
			wantStatus(t, http.StatusOK).wantBody(t, `data-dead-letter="`+pay+`"`)
		b.get("/console/dead-letters?since=yesterday").wantStatus(t, http.StatusBadRequest).
			wantBody(t, "since must be a time")
		b.get("/console/dead-letters?status=abc").wantStatus(t, http.StatusBadRequest).
			wantBody(t, "status &#34;abc&#34; is not a number")
		b.get("/console/dead-letters?reason=bored").wantStatus(t, http.StatusBadRequest).
			wantBody(t, "reason &#34;bored&#34; is not exhausted")

		ops := e.browser(t)
		ops.login(writeToken)
		ops.get("/console/dead-letters?endpoint=crm-api&reason=permanent").
			wantBody(t, `href="/console/replay?endpoint=crm-api&amp;reason=permanent"`)
	})
}

func TestReplayOutcomeFilter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		replayed := e.deadLetter(t, newCallout("pay-api", "k-1", "application/json", []byte(`{}`)), "no")
		left := e.deadLetter(t, newCallout("pay-api", "k-2", "application/json", []byte(`{}`)), "no")
		ops := e.browser(t)
		csrf := ops.login(writeToken)
		p := ops.post("/console/dead-letters/"+replayed+"/replay", url.Values{"csrf": {csrf}}).
			wantStatus(t, http.StatusSeeOther)
		if loc := p.Header.Get("Location"); !strings.HasPrefix(loc, "/console/callouts/") || !strings.HasSuffix(loc, "?replayed=new") {
			t.Fatalf("Location %q", loc)
		}
		ops.get(p.Header.Get("Location")).wantStatus(t, http.StatusOK).
			wantBody(t, "Replayed: this is the new replay chain.", `href="/console/dead-letters/`+replayed+`"`)

		ops.get("/console/dead-letters?replay=pending").wantBody(t, `data-dead-letter="`+replayed+`"`, "replayed: pending (scheduled)").
			wantNoBody(t, `data-dead-letter="`+left+`"`)
		ops.get("/console/dead-letters?replay=none").wantBody(t, `data-dead-letter="`+left+`"`).
			wantNoBody(t, `data-dead-letter="`+replayed+`"`)
		ops.get("/console/dead-letters?replay=none").wantBody(t, `data-dead-letter="`+left+`"`, `data-total="1"`)

		// Replaying it again makes nothing: the chain holds the key.
		p = ops.post("/console/dead-letters/"+replayed+"/replay", url.Values{"csrf": {csrf}}).wantStatus(t, http.StatusSeeOther)
		ops.get(p.Header.Get("Location")).wantBody(t, "Nothing was sent")
		if !e.logs.HasAudit(map[string]string{"token": "ops", "action": "replay", "dead_letter_id": replayed, "result": "replayed"}) {
			t.Fatalf("no audit line of the replay: %v", e.logs.Audits())
		}

		viewer := e.browser(t)
		vcsrf := viewer.login(readToken)
		viewer.post("/console/dead-letters/"+left+"/replay", url.Values{"csrf": {vcsrf}}).
			wantStatus(t, http.StatusForbidden).wantBody(t, "scope read")
		if !e.logs.HasAudit(map[string]string{"token": "viewer", "action": "replay", "result": "forbidden"}) {
			t.Fatalf("no audit line of the refused replay: %v", e.logs.Audits())
		}
	})
}

func TestDeadLetterDetailEscapesHostileInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := newCallout("crm-api", `k"><script>`, "text/plain", []byte("<script>alert(1)</script>"))
		nc.Path = "/v1/<img src=x onerror=alert(2)>"
		nc.Header.Set("X-Note", `"><script>alert(3)</script>`)
		id := e.deadLetter(t, nc, `<html><script>alert("upstream")</script></html>`)
		b := e.browser(t)
		b.login(writeToken)
		p := b.get("/console/dead-letters/"+id).wantStatus(t, http.StatusOK)
		p.wantBody(t, "<h1>Dead letter "+id+"</h1>",
			`<pre class="body" data-body="request">&lt;script&gt;alert(1)&lt;/script&gt;</pre>`,
			"&lt;html&gt;&lt;script&gt;alert(&#34;upstream&#34;)&lt;/script&gt;&lt;/html&gt;",
			"/v1/&lt;img src=x onerror=alert(2)&gt;", "X-Note: &#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;",
			"Authorization: [REDACTED]", // the API's redaction
			`href="https://org.my.salesforce.com/001000000000001AAA"`, "422", "status_4xx",
			`action="/console/dead-letters/`+id+`/replay"`)
		p.wantNoBody(t, "<script>alert", "<img src=x", "caller-secret")
		if strings.Count(p.Body, "<script") != 1 {
			t.Fatalf("a page has exactly one script, the console's own:\n%s", p.Body)
		}
		b.get("/console/dead-letters/nonexistent").wantStatus(t, http.StatusNotFound)
	})
}
