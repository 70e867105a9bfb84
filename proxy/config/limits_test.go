package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// TestLimitsDefaults: a file without a limits section gets every default
// (contract §10, docs/limits.md); keys given replace only themselves.
func TestLimitsDefaults(t *testing.T) {
	dir := keyFiles(t)
	cfg := mustParse(t, doc(nil, dir), baseEnv().get)
	want := config.Limits{
		ReadHeaderTimeout: 10 * time.Second, BodyReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout:    60 * time.Second,
		MaxConnections: 2048, AdminMaxConnections: 64, MaxHeaderBytes: 65536, MaxHeaderFields: 100,
		MaxInflightBytes: 256 << 20, OverloadWait: time.Second,
		// Two issuers in the base document: a fair share is half the budget.
		MaxInflightBytesPerIssuer: 128 << 20,
		// And a third of the connections (the two and the unverified group).
		MaxConnectionsPerIssuer: 682,
		AdminLoginFailures:      10, AdminLoginWindow: time.Minute, AdminLoginSources: 10000,
	}
	if cfg.Limits != want {
		t.Errorf("defaults = %+v\nwant %+v", cfg.Limits, want)
	}
	cfg = mustParse(t, doc(map[string]string{"extra": "limits:\n  idle_timeout: 5s\n  max_connections: 10\n" +
		"  max_inflight_bytes: 33554432\n"}, dir), baseEnv().get)
	// Half of 32 MiB is less than one largest callout (12 MiB + 12 MiB):
	// the fair share is that.
	want.IdleTimeout, want.MaxConnections, want.MaxInflightBytes = 5*time.Second, 10, 32<<20
	want.MaxInflightBytesPerIssuer = 24 << 20
	want.MaxConnectionsPerIssuer = 3 // 10 / 3
	if cfg.Limits != want {
		t.Errorf("limits = %+v\nwant %+v", cfg.Limits, want)
	}
}

// TestInflightShareDefaults: limits.max_inflight_bytes_per_issuer
// defaults to the budget divided by the issuers, never below one largest
// callout; none with one issuer; a value given is kept.
func TestInflightShareDefaults(t *testing.T) {
	runShareDefaults(t, "max_inflight_bytes_per_issuer",
		func(l config.Limits) int64 { return l.MaxInflightBytesPerIssuer }, []shareCase{
			{"one issuer: no share", issuersAuth("https://a.my.salesforce.com"), "", 0},
			{"four issuers: a quarter", issuersAuth("https://a.my.salesforce.com", "https://b.my.salesforce.com",
				"https://c.my.salesforce.com", "https://d.my.salesforce.com"), "", 64 << 20},
			{"twelve issuers: one largest callout", issuersAuth("https://a1.my.salesforce.com", "https://a2.my.salesforce.com",
				"https://a3.my.salesforce.com", "https://a4.my.salesforce.com", "https://a5.my.salesforce.com",
				"https://a6.my.salesforce.com", "https://a7.my.salesforce.com", "https://a8.my.salesforce.com",
				"https://a9.my.salesforce.com", "https://b1.my.salesforce.com", "https://b2.my.salesforce.com",
				"https://b3.my.salesforce.com"), "", 24 << 20},
			{"given", "", "limits:\n  max_inflight_bytes_per_issuer: 1000000\n", 1000000},
		})
}

// TestConnectionShareDefaults: limits.max_connections_per_issuer defaults
// to max_connections divided by the issuers plus one (the group of requests
// whose token is not verified yet), at least 1; none with one issuer; a
// value given is kept.
func TestConnectionShareDefaults(t *testing.T) {
	runShareDefaults(t, "max_connections_per_issuer",
		func(l config.Limits) int64 { return int64(l.MaxConnectionsPerIssuer) }, []shareCase{
			{"one issuer: no share", issuersAuth("https://a.my.salesforce.com"), "", 0},
			{"three issuers: a quarter", issuersAuth("https://a.my.salesforce.com", "https://b.my.salesforce.com",
				"https://c.my.salesforce.com"), "", 512},
			{"two issuers, two connections: at least 1", "", "limits:\n  max_connections: 2\n", 1},
			{"given", "", "limits:\n  max_connections_per_issuer: 100\n", 100},
		})
}

// shareCase is one document of a per-issuer share test: auth replaces the
// base document's auth section (its two issuers) unless empty, extra is
// added, and want is the share the parsed limits must hold.
type shareCase struct {
	name, auth, extra string
	want              int64
}

// runShareDefaults parses each case's document and checks the share that
// share reads from its limits (named key in failures).
func runShareDefaults(t *testing.T, key string, share func(config.Limits) int64, cases []shareCase) {
	t.Helper()
	dir := keyFiles(t)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			over := map[string]string{"extra": tt.extra}
			if tt.auth != "" {
				over["auth"] = tt.auth
			}
			cfg := mustParse(t, doc(over, dir), baseEnv().get)
			if got := share(cfg.Limits); got != tt.want {
				t.Errorf("%s = %d, want %d", key, got, tt.want)
			}
		})
	}
}

// issuersAuth is an auth section trusting issuers, each with the HS256
// secret of env JWT_SECRET.
func issuersAuth(issuers ...string) string {
	var keys []string
	for _, iss := range issuers {
		keys = append(keys, "{issuer: "+iss+", hs256_secret_env: JWT_SECRET}")
	}
	return "auth:\n  issuers: [" + strings.Join(issuers, ", ") + "]\n  audience: callout-proxy\n  algorithms: [HS256]\n" +
		"  issuer_keys: [" + strings.Join(keys, ", ") + "]\n"
}

func TestValidateLimits(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"negative durations", map[string]string{"extra": "limits:\n  read_header_timeout: -1s\n  idle_timeout: -2s\n"},
			[]string{"limits.read_header_timeout: -1s is negative", "limits.idle_timeout: -2s is negative"}},
		{"no connections", map[string]string{"extra": "limits:\n  max_connections: -1\n  admin_max_connections: -3\n"},
			[]string{"limits.max_connections: -1: at least 1", "limits.admin_max_connections: -3: at least 1"}},
		{"header limits too small", map[string]string{"extra": "limits:\n  max_header_bytes: 100\n  max_header_fields: 3\n"},
			[]string{"limits.max_header_bytes: 100: at least 4096", "limits.max_header_fields: 3: at least 16"}},
		{"budget below one callout", map[string]string{"extra": "limits:\n  max_inflight_bytes: 1048576\n"},
			[]string{"limits.max_inflight_bytes: 1048576 bytes: at least 25165824"}},
		{"budget below large bodies", map[string]string{"extra": "limits:\n  max_inflight_bytes: 33554432\n",
			"policy": "policy:\n  max_request_bytes: 20000000\n  max_response_bytes: 20000000\n"},
			[]string{"limits.max_inflight_bytes: 33554432 bytes: at least 40000000"}},
		{"negative share", map[string]string{"extra": "limits:\n  max_inflight_bytes_per_issuer: -1\n"},
			[]string{"limits.max_inflight_bytes_per_issuer: -1 is negative"}},
		{"negative connection share", map[string]string{"extra": "limits:\n  max_connections_per_issuer: -1\n"},
			[]string{"limits.max_connections_per_issuer: -1 is negative"}},
		{"connection share over the cap", map[string]string{"extra": "limits:\n  max_connections: 10\n  max_connections_per_issuer: 11\n"},
			[]string{"limits.max_connections_per_issuer: 11 is half of limits.max_connections (10) or more"}},
		{"connection share of half the cap", map[string]string{"extra": "limits:\n  max_connections: 32\n  max_connections_per_issuer: 16\n"},
			[]string{"limits.max_connections_per_issuer: 16 is half of limits.max_connections (32) or more"}},
		{"login throttle", map[string]string{"extra": "limits:\n  admin_login_failures: -1\n  admin_login_window: -1s\n  admin_login_sources: -5\n"},
			[]string{"limits.admin_login_failures: -1: at least 1", "limits.admin_login_window: -1s is negative",
				"limits.admin_login_sources: -5: at least 1"}},
		{"unknown key", map[string]string{"extra": "limits:\n  max_inflight: 1\n"},
			[]string{"limits.max_inflight: unknown key"}},
	})
}
