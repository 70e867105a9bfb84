package httpx

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

func TestGuard(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	tests := []struct {
		name, method, target string
		want                 int
		code                 problem.Code // "" when next serves it
	}{
		{"GET served", "GET", "/admin/v1/endpoints", http.StatusTeapot, ""},
		{"DELETE served", "DELETE", "/admin/v1/dead-letters/x", http.StatusTeapot, ""},
		{"TRACE refused", "TRACE", "/", 405, problem.MethodNotAllowed},
		{"lower-case trace refused", "trace", "/", 405, problem.MethodNotAllowed},
		{"TRACK refused", "TRACK", "/", 405, problem.MethodNotAllowed},
		{"CONNECT refused", "CONNECT", "example.com:443", 405, problem.MethodNotAllowed},
		{"absolute-form refused", "GET", "http://example.com/admin/v1/endpoints", 400, problem.AbsoluteForm},
		{"asterisk-form refused", "OPTIONS", "*", 400, problem.AbsoluteForm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.Method, r.RequestURI = tt.method, tt.target
			w := httptest.NewRecorder()
			Guard(next).ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d", w.Code, tt.want)
			}
			if tt.code == "" {
				return
			}
			var pb problem.Body
			if err := json.Unmarshal(w.Body.Bytes(), &pb); err != nil || pb.Type != problem.TypeBase+string(tt.code) {
				t.Fatalf("body %s (%v), want problem %s", w.Body, err, tt.code)
			}
			if tt.want == 405 && w.Header().Get("Allow") != AllowedMethods {
				t.Fatalf("Allow = %q, want %q", w.Header().Get("Allow"), AllowedMethods)
			}
		})
	}
}

func TestRouterAnswersAndJSON(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{"not-found": NotFound, "method-not-allowed": MethodNotAllowed} {
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest("GET", "/x", nil))
		var pb problem.Body
		if err := json.Unmarshal(w.Body.Bytes(), &pb); err != nil || pb.Type != problem.TypeBase+name ||
			w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	w := httptest.NewRecorder()
	WriteJSON(w, http.StatusAccepted, map[string]string{"id": "x"})
	if w.Code != 202 || w.Body.String() != `{"id":"x"}`+"\n" || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("WriteJSON = %d %q %q", w.Code, w.Body, w.Header().Get("Content-Type"))
	}
	w = httptest.NewRecorder()
	WriteJSON(w, http.StatusOK, func() {}) // cannot be encoded
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("WriteJSON of a func = %d, want 500", w.Code)
	}
}
