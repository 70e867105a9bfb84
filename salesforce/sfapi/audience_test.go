package sfapi

import (
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestJWTAudience derives `aud` from the login URL as the Salesforce CLI
// does: sandbox hosts give test.salesforce.com, every other host
// login.salesforce.com — never the My Domain URL itself.
func TestJWTAudience(t *testing.T) {
	for _, c := range []struct{ login, want string }{
		{"https://login.salesforce.com", ProductionAudience},
		{"https://acme.my.salesforce.com", ProductionAudience},
		{"https://acme.my.salesforce.com/", ProductionAudience},
		{"https://test.salesforce.com", SandboxAudience},
		{"https://TEST.salesforce.com", SandboxAudience},
		{"https://acme--uat.sandbox.my.salesforce.com", SandboxAudience},
		{"https://cs42.salesforce.com", SandboxAudience},
		{"https://acme--uat.cs42.my.salesforce.com", SandboxAudience},
		{"https://cs42x.salesforce.com", ProductionAudience},
		{"https://docs.salesforce.com", ProductionAudience},
		{"https://127.0.0.1:8443", ProductionAudience},
		{"::not a url", ProductionAudience},
	} {
		if got := JWTAudience(c.login); got != c.want {
			t.Errorf("JWTAudience(%q) = %s, want %s", c.login, got, c.want)
		}
	}
	cr := Credentials{LoginURL: "https://acme.my.salesforce.com", Audience: "https://acme.my.site.com/customers/"}
	if got := cr.audience(); got != "https://acme.my.site.com/customers" {
		t.Errorf("override: aud = %s", got)
	}
}

// TestAudienceRefused: the emulator, like Salesforce, accepts only
// login/test.salesforce.com (or a configured site) as `aud`, whatever URL
// the assertion is posted to. The env posts to the emulator's own URL (a
// My Domain stand-in) and is accepted with the derived production
// audience; a sandbox org refuses it until salesforce.audience says test.
func TestAudienceRefused(t *testing.T) {
	e := newEnvWith(t, func(o *sfemu.Options) { o.Audiences = []string{SandboxAudience} })
	_, err := e.client.UpsertCollection(ctxT(t), object, extField, []Record{{extField: "x"}})
	if ClassOf(err) != AuthFailed || !strings.Contains(err.Error(), "invalid_grant") ||
		!strings.Contains(err.Error(), "Audience validation failed") {
		t.Fatalf("sandbox org, production aud: %v, want invalid_grant Audience validation failed", err)
	}
	e.client.tokens.creds.Audience = SandboxAudience
	e.client.tokens.retryAt = e.clk.Now() // no backoff in the way of this check
	if _, err := e.client.UpsertCollection(ctxT(t), object, extField,
		[]Record{{extField: "x"}}); err != nil {
		t.Fatalf("with salesforce.audience: %v", err)
	}
	// The old behaviour — aud = the login URL — is refused.
	old := newEnv(t)
	old.client.tokens.creds.Audience = old.emu.URL
	if _, err := old.client.UpsertCollection(ctxT(t), object, extField,
		[]Record{{extField: "x"}}); ClassOf(err) != AuthFailed {
		t.Errorf("aud = the My Domain URL was accepted: %v", err)
	}
}
