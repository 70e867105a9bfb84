package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
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

// nextSource is a request's address, a new one for each number n gives:
// the login throttle logs a refused write only for its source's first
// failure in a window, and the tests expect every refusal's line
// (admin_throttle_test.go tests the collapse).
func nextSource(n *atomic.Int32) string {
	return "192.0.2." + strconv.Itoa(int(n.Add(1))%250) + ":1234"
}

// serve sends one admin request to h from the address remote with token
// ("" for none) and body ("" for none) and returns the recorded answer.
func serve(t *testing.T, h http.Handler, remote, method, path, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.RemoteAddr = remote
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
