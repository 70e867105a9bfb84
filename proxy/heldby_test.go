package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// TestHeldByInTheStatusDocument: a callout held behind the endpoint's open
// breaker says so in its status document, held_by {gate breaker_open,
// level endpoint, until} (contract §12), on its 202 and on GET
// /v1/callouts/{id}: the write whose failure opened it and the next one.
func TestHeldByInTheStatusDocument(t *testing.T) {
	rig := &clockRig{}
	rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rig.hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}, extra: "    breaker_failures: 1\n"})
	first := rig.do(t, http.MethodPost, "/callout/api/charges", http.Header{"Idempotency-Key": {"held-1"}}, `{"n":1}`)
	if first.Code != http.StatusAccepted {
		t.Fatalf("the failing write: %d %s, want 202", first.Code, first.Body)
	}
	held := rig.do(t, http.MethodPost, "/callout/api/charges", http.Header{"Idempotency-Key": {"held-2"}}, `{"n":2}`)
	for name, rec := range map[string][]byte{"202 of the write that failed": first.Body.Bytes(), "202": held.Body.Bytes(),
		"GET": rig.do(t, http.MethodGet, "/v1/callouts/"+held.Header().Get("Callout-Id"), nil, "").Body.Bytes()} {
		var doc api.StatusDocument
		if err := json.Unmarshal(rec, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc.State != policy.Held || doc.HeldBy == nil || doc.HeldBy.Gate != policy.GateBreakerOpen ||
			doc.HeldBy.Level != api.HeldByEndpoint || doc.HeldBy.Until == nil {
			t.Errorf("%s: %s, want state held, held_by breaker_open at level endpoint with until", name, rec)
		}
	}
	if got := rig.hits.Load(); got != 1 {
		t.Errorf("upstream hits = %d, want 1 (the held write is not attempted)", got)
	}
}
