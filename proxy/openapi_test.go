package proxy

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/internal/openapicheck"
)

// TestOpenAPICalloutAPI: docs/openapi/callout.yaml is a valid OpenAPI 3.1
// document that describes every route of the callout listener (the real
// router of routes.go) and nothing it does not serve, and its schemas have
// the fields the handlers write.
func TestOpenAPICalloutAPI(t *testing.T) {
	doc := openapicheck.Load(t, "callout.yaml")
	rig := newClockRig(t, http.StatusOK)
	openapicheck.Routes(t, doc, rig.srv.Handler().(chi.Routes))
	openapicheck.Schemas(t, doc, map[string]any{
		"StatusDocument": api.StatusDocument{}, "AttemptDoc": api.AttemptDoc{}, "ResponseDoc": api.ResponseDoc{},
		"PolicyDocument": api.PolicyDocument{}, "Healthz": Healthz{},
	})
}
