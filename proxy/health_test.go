package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// TestAdminPathsOnTheCalloutListener: an admin API or /metrics path asked
// of the callout listener is a 404 not-admin-listener problem that says
// where the admin API is, so calloutctl pointed at the wrong port can tell
// its user; other unknown paths stay plain not-found.
func TestAdminPathsOnTheCalloutListener(t *testing.T) {
	rig := newClockRig(t, http.StatusOK)
	for path, code := range map[string]string{
		"/admin/v1/dead-letters": "not-admin-listener",
		"/admin/v1/endpoints/x":  "not-admin-listener",
		"/metrics":               "not-admin-listener",
		"/nope":                  "not-found",
	} {
		rec := httptest.NewRecorder()
		rig.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var pb api.Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &pb); err != nil || rec.Code != http.StatusNotFound ||
			pb.Type != "urn:callout-proxy:problem:"+code {
			t.Fatalf("GET %s = %d %s, want 404 %s", path, rec.Code, rec.Body, code)
		}
	}
}

// TestHealthzReportsTheBuild: /healthz says ok and which build answers.
func TestHealthzReportsTheBuild(t *testing.T) {
	rig := newClockRig(t, http.StatusOK)
	rig.srv.d.Build = api.BuildInfo{Version: "v1.2.3", Commit: "abc", BuildDate: "2026-03-02T09:00:00Z", GoVersion: "go1.26"}
	rec := httptest.NewRecorder()
	rig.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	var h Healthz
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil || rec.Code != 200 || h.Status != "ok" ||
		h.Version != "v1.2.3" || h.Commit != "abc" || h.BuildDate != "2026-03-02T09:00:00Z" {
		t.Fatalf("/healthz = %d %s", rec.Code, rec.Body)
	}
}
