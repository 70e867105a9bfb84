package console_test

import (
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// TestSessionsAcrossReload: a reload's new admin handler keeps the console
// sessions whose admin token it still has under the same name with the same
// scope, checked on their next request; a session whose token was removed
// (or renamed), downgraded or upgraded ends, and its page goes to the login
// form (docs/console.md, "Sessions and reloads").
func TestSessionsAcrossReload(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ops, viewer := e.browser(t), e.browser(t)
		ops.login(writeToken)
		viewer.login(readToken)
		stays := func(b *browser) {
			t.Helper()
			b.get("/console/endpoints").wantStatus(t, http.StatusOK)
		}
		ends := func(b *browser, who string) {
			t.Helper()
			if p := b.get("/console/endpoints").wantStatus(t, http.StatusSeeOther); p.Header.Get("Location") !=
				"/console/login?next=%2Fconsole%2Fendpoints" {
				t.Fatalf("%s: Location %q, want the login form", who, p.Header.Get("Location"))
			}
			b.get("/console/endpoints").wantStatus(t, http.StatusSeeOther) // ended, not only refused once
		}

		// ops unchanged, viewer's token renamed: viewer's session ends.
		e.reload(t, config.AdminToken{Name: "ops", TokenEnv: "W", Scope: "write"},
			config.AdminToken{Name: "auditor", TokenEnv: "R", Scope: "read"})
		stays(ops)
		ends(viewer, "viewer renamed")
		ops.csrf() // still a write session: its forms carry the CSRF field

		// viewer logs in again as auditor; then ops is downgraded to read and
		// auditor upgraded to write: both sessions end.
		auditor := e.browser(t)
		auditor.login(readToken)
		e.reload(t, config.AdminToken{Name: "ops", TokenEnv: "W", Scope: "read"},
			config.AdminToken{Name: "auditor", TokenEnv: "R", Scope: "write"})
		ends(ops, "ops downgraded")
		ends(auditor, "auditor upgraded")

		// A token removed: its session ends; a new login works on the
		// configuration in force.
		again := e.browser(t)
		again.login(writeToken)
		stays(again)
		e.reload(t, config.AdminToken{Name: "auditor", TokenEnv: "R", Scope: "write"})
		ends(again, "ops removed")
	})
}
