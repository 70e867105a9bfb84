package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// testTokens are the admin tokens of the tests: ops with scope write
// (token write) and viewer with scope read (token read).
func testTokens(t *testing.T, write, read string) *auth.AdminTokens {
	t.Helper()
	env := map[string]string{"OPS": write, "VIEWER": read}
	tokens, err := auth.NewAdminTokens(config.Admin{Tokens: []config.AdminToken{
		{Name: "ops", TokenEnv: "OPS", Scope: "write"}, {Name: "viewer", TokenEnv: "VIEWER", Scope: "read"},
	}}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// serve sends one admin request to h with token ("" for none) and body (""
// for none) and returns the recorded answer.
func serve(t *testing.T, h http.Handler, method, path, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
