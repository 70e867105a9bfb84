package config_test

import (
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
	}
	if cfg.Limits != want {
		t.Errorf("defaults = %+v\nwant %+v", cfg.Limits, want)
	}
	cfg = mustParse(t, doc(map[string]string{"extra": "limits:\n  idle_timeout: 5s\n  max_connections: 10\n" +
		"  max_inflight_bytes: 33554432\n"}, dir), baseEnv().get)
	want.IdleTimeout, want.MaxConnections, want.MaxInflightBytes = 5*time.Second, 10, 32<<20
	if cfg.Limits != want {
		t.Errorf("limits = %+v\nwant %+v", cfg.Limits, want)
	}
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
		{"unknown key", map[string]string{"extra": "limits:\n  max_inflight: 1\n"},
			[]string{"limits.max_inflight: unknown key"}},
	})
}
