package proctest

import (
	"fmt"
	"strings"
)

// Loopback is an endpoint setting that lets it reach upstreams on
// 127.0.0.1 (an httptest server, an Upstream), which the SSRF guard
// refuses otherwise (docs/configuration.md, allowed_networks).
const Loopback = "allowed_networks: [127.0.0.0/8]"

// Config is a test configuration: both listeners on 127.0.0.1:0, callers'
// HS256 tokens (contract §4) verified with the secret in the environment
// variable TEST_JWT_SECRET for the audience callout-proxy. The zero value
// is the embedded store with no issuer and no endpoint.
type Config struct {
	// RedisURL is redis.url; "" leaves the store embedded.
	RedisURL string
	// Issuers are the orgs whose tokens are accepted.
	Issuers []string
	// Policy are the policy section's "key: value" lines.
	Policy []string
	// Endpoints are the endpoints section's entries (Endpoint).
	Endpoints []string
}

// YAML renders the configuration.
func (c Config) YAML() string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n")
	if c.RedisURL != "" {
		fmt.Fprintf(&b, "redis:\n  url: %s\n", c.RedisURL)
	}
	fmt.Fprintf(&b, "auth:\n  issuers: [%s]\n  audience: callout-proxy\n", strings.Join(c.Issuers, ", "))
	b.WriteString("  algorithms: [HS256]\n  hs256_secret_env: TEST_JWT_SECRET\n")
	if len(c.Policy) > 0 {
		b.WriteString("policy:\n")
		for _, l := range c.Policy {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("endpoints:\n")
	for _, e := range c.Endpoints {
		b.WriteString(e)
	}
	return b.String()
}

// Endpoint renders one entry of an endpoints section: name, its url and
// extra settings, each one "key: value" line (Loopback among them, for an
// upstream on 127.0.0.1).
func Endpoint(name, url string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    url: %s\n", name, url)
	for _, e := range extra {
		b.WriteString("    " + e + "\n")
	}
	return b.String()
}
