package config_test

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

func TestLogAccess(t *testing.T) {
	if got := mustParse(t, doc(nil, ""), baseEnv().get).Log.Access; got != config.LogAccessAll {
		t.Errorf("log.access by default = %q, want all (docs/operating.md \"Logs\")", got)
	}
	for _, v := range []string{config.LogAccessAll, config.LogAccessErrors, config.LogAccessNone} {
		cfg := mustParse(t, doc(map[string]string{"extra": "log:\n  access: " + v + "\n"}, ""), baseEnv().get)
		if cfg.Log.Access != v {
			t.Errorf("log.access %s parsed as %q", v, cfg.Log.Access)
		}
	}
	runInvalid(t, []invalidCase{
		{"unknown value", map[string]string{"extra": "log:\n  access: debug\n"},
			[]string{`log.access: "debug" is not one of all, errors, none`}},
		{"unknown key", map[string]string{"extra": "log:\n  acess: all\n"},
			[]string{`log.acess: unknown key`}},
	})
}

func TestGateStaleness(t *testing.T) {
	if got := mustParse(t, doc(nil, ""), baseEnv().get).Redis.GateStaleness; got != 100*time.Millisecond {
		t.Errorf("redis.gate_staleness by default = %s, want 100ms", got)
	}
	cfg := mustParse(t, doc(map[string]string{"redis": "redis:\n  gate_staleness: 250ms\n"}, ""), baseEnv().get)
	if cfg.Redis.GateStaleness != 250*time.Millisecond {
		t.Errorf("redis.gate_staleness 250ms parsed as %s", cfg.Redis.GateStaleness)
	}
	runInvalid(t, []invalidCase{
		{"too short", map[string]string{"redis": "redis:\n  gate_staleness: 5ms\n"},
			[]string{"redis.gate_staleness: 5ms is outside 10ms to 10s"}},
		{"too long", map[string]string{"redis": "redis:\n  gate_staleness: 1m\n"},
			[]string{"redis.gate_staleness: 1m0s is outside 10ms to 10s"}},
		{"negative", map[string]string{"redis": "redis:\n  gate_staleness: -1s\n"},
			[]string{"redis.gate_staleness: -1s is outside 10ms to 10s"}},
	})
}

func TestAdminPprof(t *testing.T) {
	if mustParse(t, doc(nil, ""), baseEnv().get).Admin.Pprof {
		t.Error("admin.pprof is on by default")
	}
	runInvalid(t, []invalidCase{
		{"no write token", map[string]string{"admin": "admin:\n  pprof: true\n  tokens:\n    - {name: viewer, token_env: ADMIN_TOKEN, scope: read}\n"},
			[]string{"admin.pprof: true, but no admin token has scope write"}},
	})
}
