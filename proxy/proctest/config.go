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
// HS256 tokens (contract §4) for the audience callout-proxy, verified as
// AuthYAML says. The zero value is the embedded store with no issuer and no
// endpoint.
type Config struct {
	// RedisURL is redis.url; "" leaves the store embedded.
	RedisURL string
	// Issuers are the orgs whose tokens are accepted.
	Issuers []string
	// Policy are the policy section's "key: value" lines.
	Policy []string
	// Endpoints are the endpoints section's entries (Endpoint).
	Endpoints []string
	// Sections are further top-level sections as YAML text (for example
	// "limits:\n  write_timeout: 5s\n"), rendered before the endpoints.
	Sections string
}

// YAML renders the configuration.
func (c Config) YAML() string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n")
	if c.RedisURL != "" {
		fmt.Fprintf(&b, "redis:\n  url: %s\n", c.RedisURL)
	}
	b.WriteString(AuthYAML(c.Issuers...))
	if len(c.Policy) > 0 {
		b.WriteString("policy:\n")
		for _, l := range c.Policy {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString(c.Sections)
	b.WriteString("endpoints:\n")
	for _, e := range c.Endpoints {
		b.WriteString(e)
	}
	return b.String()
}

// AuthYAML renders an auth section accepting HS256 tokens of issuers for
// the audience callout-proxy. One issuer: its secret is in TEST_JWT_SECRET
// (top-level keys, bound to the one issuer). Several: each issuer has its
// own secret, IssuerSecret, in TEST_JWT_SECRET_<n> (n from 1, in order)
// under auth.issuer_keys, so a test org's secret cannot sign for another
// (contract §9); SecretEnv is the matching environment.
func AuthYAML(issuers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "auth:\n  issuers: [%s]\n  audience: callout-proxy\n  algorithms: [HS256]\n", strings.Join(issuers, ", "))
	if len(issuers) == 1 {
		b.WriteString("  hs256_secret_env: TEST_JWT_SECRET\n")
		return b.String()
	}
	b.WriteString("  issuer_keys:\n")
	for i, iss := range issuers {
		fmt.Fprintf(&b, "    - {issuer: %s, hs256_secret_env: TEST_JWT_SECRET_%d}\n", iss, i+1)
	}
	return b.String()
}

// IssuerSecret is the HS256 secret of issuer iss in an AuthYAML
// configuration of several issuers: base (at least 32 bytes) joined with
// iss.
func IssuerSecret(base, iss string) string { return base + "/" + iss }

// SecretEnv is the environment AuthYAML(issuers...) reads: TEST_JWT_SECRET
// is base, TEST_JWT_SECRET_<n> is IssuerSecret(base, issuers[n-1]).
func SecretEnv(base string, issuers ...string) map[string]string {
	env := map[string]string{"TEST_JWT_SECRET": base}
	for i, iss := range issuers {
		env[fmt.Sprintf("TEST_JWT_SECRET_%d", i+1)] = IssuerSecret(base, iss)
	}
	return env
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
