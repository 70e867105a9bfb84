package app

import (
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// TestReloadAppliesTheShares: the organisation shares of the connections
// and of the memory budget are fair shares resolved from auth.issuers, so a
// reload that adds an issuer is put in force (not refused as a restart-only
// change of limits.max_connections_per_issuer) and gives the listener and
// the budget the new share at once: 2048/(2+1) = 682 connections and
// 256 MiB/2 bytes with two issuers, 512 and 256 MiB/3 with three.
func TestReloadAppliesTheShares(t *testing.T) {
	env := map[string]string{"S": "a-secret-of-at-least-thirty-two-bytes!!", "A": "admin-token-0123456789"}
	parse := func(orgs ...string) *config.Config {
		issuers, keys := "", ""
		for _, o := range orgs {
			iss := "https://" + o + ".my.salesforce.com"
			issuers += iss + ", "
			keys += "    - {issuer: " + iss + ", hs256_secret_env: S}\n"
		}
		return parseConfig(t, `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth:
  issuers: [`+issuers+`]
  audience: callout-proxy
  algorithms: [HS256]
  issuer_keys:
`+keys+`admin:
  tokens: [{name: ops, token_env: A, scope: write}]
endpoints:
  pay-api:
    url: https://api.example.com
`, env)
	}
	cur, next := parse("a", "b"), parse("a", "b", "c")
	if keys := restartOnly(cur, next); len(keys) != 0 {
		t.Fatalf("adding an issuer needs a restart of %v", keys)
	}
	a := runApp(t, cur, next, env)
	res, err := http.Get(a.URL() + "/healthz") // answered once Run serves
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if a.main.Share() != cur.Limits.MaxConnectionsPerIssuer || a.budget.Share() != cur.Limits.MaxInflightBytesPerIssuer {
		t.Fatalf("at start: shares %d, %d; want %d, %d", a.main.Share(), a.budget.Share(),
			cur.Limits.MaxConnectionsPerIssuer, cur.Limits.MaxInflightBytesPerIssuer)
	}
	if _, err := a.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a.main.Share() != next.Limits.MaxConnectionsPerIssuer || a.budget.Share() != next.Limits.MaxInflightBytesPerIssuer ||
		next.Limits.MaxConnectionsPerIssuer == cur.Limits.MaxConnectionsPerIssuer {
		t.Fatalf("after the reload: shares %d, %d; want %d, %d (from %d)", a.main.Share(), a.budget.Share(),
			next.Limits.MaxConnectionsPerIssuer, next.Limits.MaxInflightBytesPerIssuer, cur.Limits.MaxConnectionsPerIssuer)
	}
}
