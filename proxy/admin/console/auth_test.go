package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/admin/console"
)

func TestLogin(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		b := e.browser(t)
		t.Run("a page without a session goes to the login form", func(t *testing.T) {
			p := b.get("/console/dead-letters?endpoint=pay-api").wantStatus(t, http.StatusSeeOther)
			if got := p.Header.Get("Location"); got != "/console/login?next="+url.QueryEscape("/console/dead-letters?endpoint=pay-api") {
				t.Fatalf("Location %q", got)
			}
		})
		t.Run("an unknown token is refused and audited", func(t *testing.T) {
			b.get("/console/login").wantStatus(t, http.StatusOK)
			b.postLogin("no-such-token-0123456789", nil).
				wantStatus(t, http.StatusUnauthorized).wantBody(t, "unknown admin token")
			if !e.logs.HasAudit(map[string]string{"action": "console.login", "result": "unauthorized", "token": ""}) {
				t.Fatalf("no audit line of the refused login: %v", e.logs.Audits())
			}
		})
		t.Run("a login form posted without its nonce is refused", func(t *testing.T) {
			b2 := e.browser(t)
			b2.get("/console/login")
			b2.post("/console/login", url.Values{"token": {writeToken}, "nonce": {"forged"}}).
				wantStatus(t, http.StatusForbidden).wantBody(t, "login form expired")
		})
		t.Run("a known token starts a session with a strict cookie", func(t *testing.T) {
			p := b.postLogin(writeToken, url.Values{"next": {"/console/dead-letters?endpoint=pay-api"}}).
				wantStatus(t, http.StatusSeeOther)
			if got := p.Header.Get("Location"); got != "/console/dead-letters?endpoint=pay-api" {
				t.Fatalf("Location %q", got)
			}
			var cookie string
			for _, c := range p.Header.Values("Set-Cookie") {
				if strings.HasPrefix(c, "callout_console=") {
					cookie = c
				}
			}
			for _, part := range []string{"Path=/console", "Max-Age=1800", "HttpOnly", "SameSite=Strict"} {
				if !strings.Contains(cookie, part) {
					t.Fatalf("session cookie %q lacks %s", cookie, part)
				}
			}
			if strings.Contains(cookie, "Secure") {
				t.Fatalf("session cookie %q is Secure over plain HTTP", cookie)
			}
			b.get("/console/endpoints").wantStatus(t, http.StatusOK).wantBody(t, `<span title="admin token">ops</span>`)
			if !e.logs.HasAudit(map[string]string{"action": "console.login", "result": "ok", "token": "ops", "scope": "write"}) {
				t.Fatalf("no audit line of the login: %v", e.logs.Audits())
			}
		})
		t.Run("the session ends after its lifetime", func(t *testing.T) {
			e.clk.Advance(console.DefaultSessionLifetime)
			b.get("/console/endpoints").wantStatus(t, http.StatusSeeOther)
		})
		t.Run("logout ends the session", func(t *testing.T) {
			csrf := b.login(writeToken)
			b.post("/console/logout", url.Values{"csrf": {csrf}}).wantStatus(t, http.StatusSeeOther)
			b.get("/console/endpoints").wantStatus(t, http.StatusSeeOther)
			if !e.logs.HasAudit(map[string]string{"action": "console.logout", "token": "ops"}) {
				t.Fatal("no audit line of the logout")
			}
		})
	})
}

func TestNextStaysOnTheConsole(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, next := range []string{"https://evil.example/console/x", "//evil.example/console/", "/admin/v1/endpoints",
			"/console\\@evil.example", "/console/login", ""} {
			b := e.browser(t)
			p := b.postLogin(readToken, url.Values{"next": {next}})
			if got := p.Header.Get("Location"); got != "/console/endpoints" {
				t.Errorf("next %q: Location %q, want /console/endpoints", next, got)
			}
		}
	})
}

func TestSessionsPerTokenAreBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		viewer := e.browser(t)
		viewer.login(readToken)
		first := e.browser(t)
		first.login(writeToken)
		for range console.DefaultMaxSessionsPerToken {
			e.clk.Advance(time.Millisecond) // each login a little later: the oldest is well defined
			e.browser(t).login(writeToken)
		}
		first.get("/console/endpoints").wantStatus(t, http.StatusSeeOther) // ended: ops's oldest
		viewer.get("/console/endpoints").wantStatus(t, http.StatusOK)      // another token's: untouched
	})
}

func TestWritesNeedTheSessionsCSRFToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		b := e.browser(t)
		csrf := b.login(writeToken)
		other := e.browser(t)
		otherCSRF := other.login(writeToken)
		if otherCSRF == csrf {
			t.Fatal("two sessions share a CSRF token")
		}
		for name, form := range map[string]url.Values{
			"none": {}, "another session's": {"csrf": {otherCSRF}}, "forged": {"csrf": {"x"}},
		} {
			b.post("/console/endpoints/pay-api/disable", form).wantStatus(t, http.StatusForbidden).
				wantBody(t, "CSRF token")
			_ = name
		}
		st, _ := e.store.EndpointState(ctxT(t), "pay-api")
		if st.Disabled {
			t.Fatal("a form without the session's CSRF token disabled the endpoint")
		}
		if !e.logs.HasAudit(map[string]string{"action": "console.post", "result": "csrf", "token": "ops"}) {
			t.Fatal("no audit line of the refused form")
		}

		// A cross-site form is refused before any handler, even with the token.
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/console/endpoints/pay-api/disable",
			strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		b.do(req).wantStatus(t, http.StatusForbidden).wantBody(t, "Cross-origin request refused")

		// Without a session a POST is a 401, not a redirect.
		e.browser(t).post("/console/endpoints/pay-api/disable", url.Values{"csrf": {csrf}}).
			wantStatus(t, http.StatusUnauthorized)
	})
}

func TestSecurityHeadersAndAssets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		b := e.browser(t)
		for _, path := range []string{"/console/login", "/console/static/console.css", "/console/nope"} {
			p := b.get(path)
			csp := p.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "style-src 'self'") ||
				strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: CSP %q", path, csp)
			}
			if p.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: no nosniff", path)
			}
		}
		b.get("/console/static/console.js").wantStatus(t, http.StatusOK).wantBody(t, "data-refresh")
		b.get("/console/static/").wantStatus(t, http.StatusNotFound)
		b.get("/console/nope").wantStatus(t, http.StatusNotFound).wantBody(t, "no page at this address")
	})
}
