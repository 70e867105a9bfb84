package proxy

import (
	"encoding/json"
	"io"
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

// TestHealthEndpointsAnswerHEAD: HEAD /healthz and /readyz answer as GET
// does, status and headers, without the body (RFC 9110 §9.3.2), so a
// probe or load balancer that checks with HEAD sees the proxy healthy.
func TestHealthEndpointsAnswerHEAD(t *testing.T) {
	rig := newClockRig(t, http.StatusOK)
	srv := httptest.NewServer(rig.srv.Handler())
	t.Cleanup(srv.Close)
	for _, path := range []string{"/healthz", "/readyz"} {
		get, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = get.Body.Close()
		head, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(head.Body)
		_ = head.Body.Close()
		if head.StatusCode != get.StatusCode || head.StatusCode != http.StatusOK || len(body) != 0 ||
			head.Header.Get("Content-Type") != get.Header.Get("Content-Type") ||
			head.Header.Get("Content-Length") != get.Header.Get("Content-Length") {
			t.Errorf("HEAD %s = %s %v %q; GET = %s %v", path, head.Status, head.Header, body, get.Status, get.Header)
		}
	}
}
