package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// TestMetricsWithoutToken: /metrics is served on the admin listener with
// no token (contract §9); the admin routes still want one; TRACE is refused
// before any route.
func TestMetricsWithoutToken(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.DeadLetters.WithLabelValues("pay-api", "exhausted").Inc()
	tokens, err := auth.NewAdminTokens(config.Admin{Tokens: []config.AdminToken{
		{Name: "ops", TokenEnv: "OPS", Scope: "write"}}}, func(string) string { return admWriteToken })
	if err != nil {
		t.Fatal(err)
	}
	h := New(Deps{Config: admConfig(), Tokens: tokens, Endpoints: admFailingStore{}.fake(), Metrics: m,
		Gatherer: reg})
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("GET", "/metrics"); code != 200 ||
		!strings.Contains(body, `callout_dead_letters_total{endpoint="pay-api",reason="exhausted"} 1`) {
		t.Fatalf("/metrics = %d:\n%s", code, body)
	}
	if code, _ := get("GET", "/admin/v1/endpoints"); code != http.StatusUnauthorized {
		t.Fatalf("/admin/v1/endpoints without a token = %d, want 401", code)
	}
	if code, _ := get("TRACE", "/metrics"); code != http.StatusMethodNotAllowed {
		t.Fatalf("TRACE /metrics = %d, want 405", code)
	}
}
