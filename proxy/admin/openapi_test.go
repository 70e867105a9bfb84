package admin

import (
	"context"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/internal/openapicheck"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// TestOpenAPIAdminAPI: docs/openapi/admin.yaml is a valid OpenAPI 3.1
// document that describes every route of the admin listener with every
// dependency wired (the real router of routes.go; the console and Go's
// profiler aside, as its header says) and nothing it does not serve, and
// its schemas have the fields the handlers write; the gate's and the
// breaker's words are the code's (contract §12).
func TestOpenAPIAdminAPI(t *testing.T) {
	doc := openapicheck.Load(t, "admin.yaml")
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewAdminTokens(config.Admin{Tokens: []config.AdminToken{
		{Name: "ops", TokenEnv: "OPS", Scope: "write"}}}, func(string) string { return admWriteToken })
	if err != nil {
		t.Fatal(err)
	}
	// Every route group registers when its dependency is set; nothing here
	// is called.
	h := New(Deps{Config: admConfig(), Tokens: tokens, Metrics: m, Gatherer: prometheus.NewRegistry(), Pprof: true,
		Endpoints: &fakeEndpointStore{}, DeadLetters: &fakeDeadLetters{}, ReplayJobs: &fakeReplayJobs{},
		Callouts: struct{ Callouts }{}, Keys: struct{ Keys }{},
		Reload: func(context.Context) (string, error) { return "", nil }, Stats: &fakeStats{}})
	openapicheck.Routes(t, doc, h.(chi.Routes), "/console/", "/debug/pprof/")
	openapicheck.Schemas(t, doc, map[string]any{
		"EndpointDoc": api.EndpointDoc{}, "PartitionDoc": api.PartitionDoc{},
		"EndpointActionResult": api.EndpointActionResult{},
		"DeadLetterSummaryDoc": api.DeadLetterSummaryDoc{}, "CalloutDoc": api.CalloutDoc{},
		"RequestDoc": api.RequestDoc{}, "ReplayResultDoc": api.ReplayResultDoc{},
		"CalloutSummaryDoc": api.CalloutSummaryDoc{}, "IdempotencyKeyDoc": api.IdempotencyKeyDoc{},
		"ReplayFilter": api.ReplayFilter{}, "ReplayJobSpec": api.ReplayJobSpec{}, "ReplayJob": api.ReplayJob{},
		"ReplayJobItemDoc": api.ReplayJobItemDoc{}, "ReloadDoc": api.ReloadDoc{},
		"SearchDoc": api.SearchDoc{}, "SearchKeyHolderDoc": api.SearchKeyHolderDoc{},
		"EndpointStatsDoc": api.EndpointStatsDoc{}, "StatsPointDoc": api.StatsPointDoc{},
	})
	openapicheck.Enum(t, doc, "Gate", policy.GateOpen, policy.GateHalfOpen, policy.GateProbing,
		policy.GateBreakerOpen, policy.GatePaused, policy.GateDisabled)
	openapicheck.Enum(t, doc, "Breaker", policy.BreakerClosed, policy.BreakerOpen, policy.BreakerHalfOpen)
}
