package app

import (
	"slices"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// reloadBase is a configuration with one endpoint, HS256 callers and an
// admin token; extra is appended under endpoints.
func reloadBase(t *testing.T, top, extra string) *config.Config {
	t.Helper()
	env := map[string]string{"S": "a-secret-of-at-least-thirty-two-bytes!!", "A": "admin-token-0123456789"}
	return parseConfig(t, top+`auth:
  issuers: [https://a.my.salesforce.com]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: S
admin:
  tokens: [{name: ops, token_env: A, scope: write}]
endpoints:
  pay-api:
    url: https://api.example.com
`+extra, env)
}

// TestRestartOnly: a reload that changes only what can change live is
// allowed (an endpoint added, a policy key, log.access); one that changes
// a listener, Redis, a connection-level limit, the log's format or an
// endpoint's shards is refused naming each key.
func TestRestartOnly(t *testing.T) {
	cur := reloadBase(t, "", "")
	tests := []struct {
		name, top, extra string
		want             []string
	}{
		{"nothing", "", "", nil},
		{"live changes", "policy:\n  max_attempts: 3\nlog:\n  access: all\nlimits:\n  max_header_fields: 50\n",
			"  crm-api:\n    url: https://crm.example.com\n", nil},
		{"listeners and redis", "listen: 127.0.0.1:9999\nredis:\n  url: redis://127.0.0.1:6379/0\n", "",
			[]string{"listen", "redis"}},
		{"connection limits and log format", "limits:\n  max_connections: 10\nlog:\n  format: text\n", "",
			[]string{"limits.max_connections", "log.format"}},
		{"shards", "", "    shards: 4\n", []string{"endpoints.pay-api.shards"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := restartOnly(cur, reloadBase(t, tt.top, tt.extra))
			slices.Sort(got)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("restartOnly = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDiffNames: the endpoints a reload adds and removes.
func TestDiffNames(t *testing.T) {
	added, removed := diffNames([]string{"a", "b"}, []string{"b", "c"})
	if strings.Join(added, ",") != "c" || strings.Join(removed, ",") != "a" {
		t.Fatalf("added %v removed %v", added, removed)
	}
}
