package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
)

// shareRigIssuer is the second organisation of TestMemoryShare.
const shareRigIssuer = "https://other.my.salesforce.com"

// TestMemoryShare: in a memory budget of 16 MiB with a share of 4 MiB,
// while clockRigIssuer's organisation holds 8 MiB (half the budget: its
// stalled uploads), its next write is refused 503 overloaded, problem+json
// naming the share, with Retry-After 1 and nothing forwarded; the other
// organisation's 1 MiB write (about 2 MiB held: its body, the store's copy
// of it, the answer) is forwarded and answered 200 (contract §10).
func TestMemoryShare(t *testing.T) {
	const mib = 1 << 20
	budget := limit.NewBudget(16*mib, 20*time.Millisecond, 4*mib)
	rig := &clockRig{}
	rig.build(t, rigSpec{
		upstream: func(w http.ResponseWriter, r *http.Request) { rig.hits.Add(1) },
		issuers:  []string{shareRigIssuer},
		budget:   budget,
	})
	stalled := budget.Holder()
	stalled.Assign(clockRigIssuer)
	if err := stalled.Acquire(context.Background(), 8*mib); err != nil {
		t.Fatal(err)
	}
	defer stalled.Release()

	refused := rig.do(t, http.MethodPut, "/callout/api/v1/a", http.Header{"Idempotency-Key": {"a-1"}}, `{"n":1}`)
	var doc struct {
		Type, Detail string
		Status       int
	}
	if err := json.Unmarshal(refused.Body.Bytes(), &doc); err != nil {
		t.Fatalf("refusal body %q: %v", refused.Body, err)
	}
	switch {
	case refused.Code != http.StatusServiceUnavailable || refused.Header().Get("Retry-After") != "1":
		t.Errorf("org past its share: %d Retry-After %q, want 503 and 1", refused.Code, refused.Header().Get("Retry-After"))
	case refused.Header().Get("Content-Type") != "application/problem+json" ||
		doc.Type != "urn:callout-proxy:problem:overloaded" || doc.Status != 503:
		t.Errorf("refusal %s %+v, want a problem+json overloaded", refused.Header().Get("Content-Type"), doc)
	case !strings.Contains(doc.Detail, "limits.max_inflight_bytes_per_issuer: 4194304 bytes"):
		t.Errorf("refusal detail %q does not name the share", doc.Detail)
	}

	tok, err := auth.MintHS256([]byte(clockRigSecret), shareRigIssuer, "callout-proxy", "005000000000002AAA",
		10*time.Minute, rig.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPut, "/callout/api/v1/b", strings.NewReader(strings.Repeat("b", mib)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", "b-1")
	rec := httptest.NewRecorder()
	rig.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("the other organisation's 1 MiB write: %d %s, want 200", rec.Code, rec.Body)
	}
	if n := rig.hits.Load(); n != 1 {
		t.Errorf("upstream hits %d, want 1 (only the other organisation's write)", n)
	}
	if got := budget.InUse(); got != 8*mib {
		t.Errorf("budget in use %d after both answers, want the stalled 8 MiB", got)
	}
}
