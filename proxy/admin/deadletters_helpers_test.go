package admin

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/inspect"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/pending"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

var (
	_ DeadLetters = (*replay.Service)(nil)
	_ ReplayJobs  = (*replay.Service)(nil)
	// Keys is the callout reader's; Callouts the pending-callout reader's.
	_ Callouts = (*pending.Reader)(nil)
	_ Keys     = (*inspect.Reader)(nil)
)

// dltBody is a seeded request body with a card number to redact.
const dltBody = `{"card":{"number":"4111111111111111"},"amount":5}`

const (
	dltWrite = "dlt-write-token-0123456789"
	dltRead  = "dlt-read-token-0123456789"
)

// dltEnv is the dead-letter and replay-job routes over a real store on one backend.
type dltEnv struct {
	h     http.Handler
	clk   *clocktest.Clock
	store *redisstore.Store
	svc   *replay.Service
	logs  *proctest.LogBuffer
	// sources numbers the requests' addresses (nextSource).
	sources atomic.Int32
}

// dltConfig has pay-api (with redaction rules) and crm-api.
func dltConfig() *config.Config {
	p := policy.Defaults()
	ep := func(name string) *config.Endpoint {
		return &config.Endpoint{Name: name, AttemptTimeout: p.AttemptTimeout,
			BreakerFailures: p.BreakerFailures, BreakerProbeInterval: p.BreakerProbeInterval}
	}
	pay := ep("pay-api")
	pay.Redact = config.Redact{Headers: []string{"X-Card-Token"}, Query: []string{"api_key"},
		JSONFields: []string{"card.number"}}
	return &config.Config{Policy: p, Endpoints: map[string]*config.Endpoint{"pay-api": pay, "crm-api": ep("crm-api")}}
}

// forEachDLT runs fn on every backend with a fresh dltEnv.
func forEachDLT(t *testing.T, fn func(t *testing.T, e *dltEnv)) {
	t.Helper()
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) { fn(t, newDLTEnv(t, b)) })
}

func newDLTEnv(t *testing.T, b redistest.Backend) *dltEnv {
	t.Helper()
	e := &dltEnv{clk: clocktest.New(time.UnixMilli(1_700_000_000_000)), logs: &proctest.LogBuffer{}}
	e.logs.CheckAuditResults(t)
	e.store = redisstore.New(b.Client, redisstore.Options{PinScriptTime: true, Now: e.clk.Now})
	tokens := testTokens(t, dltWrite, dltRead)
	logger := slog.New(slog.NewJSONHandler(e.logs, nil))
	cfg := dltConfig()
	e.svc = replay.New(replay.Options{Config: cfg, Store: e.store, DeadLetters: deadletters.New(b.Client, e.store, deadletters.Options{Now: e.clk.Now, PinScriptTime: true}), Owner: "A", Logger: logger,
		Jobs: jobs.New(b.Client, jobs.Options{PinScriptTime: true, Now: e.clk.Now}), Now: e.clk.Now, Sleep: e.clk.Sleep})
	e.h = New(Deps{Config: cfg, Tokens: tokens, DeadLetters: e.svc, ReplayJobs: e.svc, Callouts: pending.New(b.Client, e.store),
		Logger: logger, Now: e.clk.Now})
	return e
}

func (e *dltEnv) do(t *testing.T, method, path, token, body string) *httptest.ResponseRecorder {
	return serve(t, e.h, nextSource(&e.sources), method, path, token, body)
}

// audits returns the "audit" log lines.
func (e *dltEnv) audits(t *testing.T) []map[string]any {
	return e.logs.Audits()
}

// dltDecode asserts a JSON answer's status (application/json) and
// decodes it into v.
func dltDecode(t *testing.T, w *httptest.ResponseRecorder, status int, v any) {
	t.Helper()
	admDecode(t, w, status, "application/json", v)
}

// seed makes a dead letter of endpoint carrying secrets in its header,
// query and body, with the last response status.
func (e *dltEnv) seed(t *testing.T, endpoint, key string, status int) string {
	t.Helper()
	ctx := t.Context()
	nc := policy.NewCallout{Endpoint: endpoint, Issuer: "https://org.my.salesforce.com", Method: "POST",
		Path: "/v1/charges", Query: "api_key=s3cret&x=1",
		Header: http.Header{"Content-Type": {"application/json"}, "X-Card-Token": {"tok_123"},
			"Idempotency-Key": {`"` + key + `"`}},
		Body: []byte(dltBody), IdempotencyKey: key}
	if _, err := e.store.Enqueue(ctx, nc, policy.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	cr, err := e.store.Claim(ctx, endpoint, redisstore.ClaimOptions{Batch: 1, Lease: time.Minute})
	if err != nil || len(cr.Claimed) != 1 {
		t.Fatalf("claim: %+v %v", cr, err)
	}
	_, err = e.store.Complete(ctx, cr.Claimed[0], policy.Completion{Action: policy.ActionDeadLetter,
		Reason: policy.DeadLetterPermanent, Error: "auth Bearer leaked-token",
		Attempt:  &policy.Attempt{StartedAt: e.clk.Now(), Status: status, Outcome: policy.Permanent},
		Response: &policy.Response{Status: status, Header: http.Header{"Set-Cookie": {"sid=1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return cr.Claimed[0].ID
}
