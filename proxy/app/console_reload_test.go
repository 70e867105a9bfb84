package app

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// TestReloadKeepsConsoleSessions: App.Reload (SIGHUP, POST
// /admin/v1/reload) builds a new admin handler; a console session whose
// admin token the new file keeps with its name and scope goes on, one whose
// token the file dropped ends (docs/console.md, "Sessions and reloads").
func TestReloadKeepsConsoleSessions(t *testing.T) {
	env := map[string]string{"S": "a-secret-of-at-least-thirty-two-bytes!!", "A": "admin-token-0123456789",
		"B": "viewer-token-0123456789"}
	parse := func(tokens string) *config.Config {
		return parseConfig(t, `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth:
  issuers: [https://a.my.salesforce.com]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: S
admin:
  tokens: [`+tokens+`]
endpoints:
  pay-api:
    url: https://api.example.com
`, env)
	}
	a := runApp(t, parse("{name: ops, token_env: A, scope: write}, {name: viewer, token_env: B, scope: read}"),
		parse("{name: ops, token_env: A, scope: write}"), env)

	nonce := regexp.MustCompile(`name="nonce" value="([^"]+)"`)
	browser := func(token string) func() int {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func() (int, string) {
			res, err := c.Get(a.AdminURL() + "/console/endpoints")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			return res.StatusCode, res.Header.Get("Location")
		}
		res, err := c.Get(a.AdminURL() + "/console/login")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		mm := nonce.FindSubmatch(body)
		if mm == nil {
			t.Fatalf("login form: %d %s", res.StatusCode, body)
		}
		req, _ := http.NewRequest(http.MethodPost, a.AdminURL()+"/console/login",
			strings.NewReader(url.Values{"token": {token}, "nonce": {string(mm[1])}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", a.AdminURL())
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if res, err = c.Do(req); err != nil || res.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %v %v", res, err)
		}
		res.Body.Close()
		if code, _ := get(); code != http.StatusOK {
			t.Fatalf("endpoints page after login: %d", code)
		}
		return func() int { code, _ := get(); return code }
	}
	ops, viewer := browser(env["A"]), browser(env["B"])
	if _, err := a.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code := ops(); code != http.StatusOK {
		t.Errorf("ops's session after the reload: %d, want 200 (its token kept its name and scope)", code)
	}
	if code := viewer(); code != http.StatusSeeOther {
		t.Errorf("viewer's session after the reload: %d, want 303 to the login form (its token is gone)", code)
	}
}
