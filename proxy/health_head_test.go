package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

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
