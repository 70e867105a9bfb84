package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCalloutFirstKeepsMiddlewareAndRequest: a callout served before the
// router still goes through every middleware of the listener (the method
// guard's 405, CloseIfBodyUnread's Connection: close on a refusal before
// the body), and the middleware's body wrappers never reach net/http's own
// request (its server reads that Body's type after the handler to decide
// whether to discard or close); other paths still reach the router.
func TestCalloutFirstKeepsMiddlewareAndRequest(t *testing.T) {
	rig := newLimitsRig(t, "max_header_fields: 64")
	h := rig.srv.Handler()

	req := httptest.NewRequest(http.MethodPost, "/callout/api/v1/x", strings.NewReader(strings.Repeat("x", 1000)))
	req.Header.Set("Idempotency-Key", `"k1"`)
	body := io.NopCloser(req.Body)
	req.Body = body
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req) // no token: 401 before the body is read
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("Connection") != "close" {
		t.Fatalf("tokenless write: %d, Connection %q, want 401 and close (CloseIfBodyUnread)",
			rec.Code, rec.Header().Get("Connection"))
	}
	if req.Body != body {
		t.Fatalf("the caller's request Body was replaced by %T: the middleware's wrapper reached net/http's request", req.Body)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodTrace, "/callout/api/v1/x", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("TRACE on a callout path: %d, want 405 from the method guard", rec.Code)
	}
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/callout": http.StatusNotFound,
		"/calloutx/api": http.StatusNotFound, "/metrics": http.StatusNotFound} {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d (the router's)", path, rec.Code, want)
		}
	}
}
