package console_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

func TestEndpointCharts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for range 3 {
			e.stats.Attempt("pay-api", policy.Retryable, 40*time.Millisecond)
		}
		e.stats.Attempt("pay-api", policy.Success, 3*time.Millisecond)
		e.stats.DeadLetter("pay-api", 1)
		e.stats.Attempt("crm-api", policy.Permanent, time.Millisecond)
		if err := e.stats.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		b := e.browser(t)
		b.login(readToken)
		b.get("/console/endpoints").wantBody(t, `<a href="/console/endpoints/pay-api">pay-api</a>`)
		p := b.get("/console/endpoints/pay-api").wantStatus(t, http.StatusOK)
		p.wantBody(t, "<h1>Endpoint pay-api</h1>", `data-refresh="10"`, `data-gate="open">open</span>`, `data-breaker="closed"`,
			`data-chart="attempts"`, `data-chart="dead-letters"`, `data-chart="latency"`,
			`<rect class="cls-retryable"`, "retryable: 3</title>", "success: 1</title>", "dead letters: 1</title>",
			`<polyline class="lat-p99"`, "1 success · 3 retryable · 0 permanent", `data-total="dead-letters">1<`,
			"latency p50 50 ms", `href="/console/endpoints/pay-api?range=1h" aria-current="true"`, "one point per 1m0s").
			wantNoBody(t, "cls-permanent\" x=") // crm-api's permanent attempt is crm-api's
		b.get("/console/endpoints/pay-api?range=7d").wantStatus(t, http.StatusOK).
			wantBody(t, `?range=7d" aria-current="true"`, "one point per 2h0m0s", "3 retryable")
		b.get("/console/endpoints/crm-api?range=24h").wantStatus(t, http.StatusOK).
			wantBody(t, "0 success · 0 retryable · 1 permanent", `<rect class="cls-permanent"`, "nothing in this range")
		b.get("/console/endpoints/pay-api?range=2d").wantStatus(t, http.StatusBadRequest).
			wantBody(t, "range &#34;2d&#34; is not one of 1h, 6h, 24h, 7d")
		b.get("/console/endpoints/no-such").wantStatus(t, http.StatusNotFound)
	})
}

func TestDeadLetterReasonApartFromLastClass(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		nc := newCallout("pay-api", "k-503", "application/json", []byte(`{}`))
		if _, err := e.store.Enqueue(ctx, nc, policy.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
		id := e.exhaust(t, "pay-api")
		b := e.browser(t)
		b.login(readToken)
		b.get("/console/dead-letters/"+id).wantStatus(t, http.StatusOK).
			wantBody(t, `data-dead-letter-reason="exhausted">reason <strong>exhausted</strong>`,
				`data-last-attempt="retryable">last attempt retryable (503)`).
			wantNoBody(t, "outcome permanent")
	})
}
