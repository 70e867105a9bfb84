package config_test

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

func TestValidateDurabilityAndSentinel(t *testing.T) {
	const sentinel = "  sentinel:\n    master_name: callouts\n    addresses: [10.0.0.1:26379]\n"
	runInvalid(t, []invalidCase{
		{"unknown level", map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/0\n  durability: quorum\n"},
			[]string{`redis.durability: must be local, replicated or fsync, not "quorum"`}},
		{"timeout with local", map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/0\n  durability_timeout: 500ms\n"},
			[]string{"redis.durability_timeout: is set, but redis.durability is local, which waits for nothing"}},
		{"fsync embedded", map[string]string{"redis": "redis:\n  durability: fsync\n"},
			[]string{"redis.durability: fsync needs a Redis (url, sentinel or cluster)"}},
		{"timeout out of range", map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/0\n  durability: replicated\n  durability_timeout: 20s\n"},
			[]string{"redis.durability_timeout: 20s is outside 10ms to 10s"}},
		{"sentinel with url", map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/0\n" + sentinel},
			[]string{"redis: set one of url, cluster and sentinel, not several"}},
		{"sentinel incomplete", map[string]string{"redis": "redis:\n  sentinel:\n    addresses: [10.0.0.1, ':26379']\n"},
			[]string{"redis.sentinel.master_name: is required", `redis.sentinel.addresses[0]: "10.0.0.1" is not host:port`,
				`redis.sentinel.addresses[1]: ":26379" is not host:port`}},
		{"sentinel address twice", map[string]string{"redis": "redis:\n  sentinel:\n    master_name: callouts\n" +
			"    addresses: [10.0.0.1:26379, 10.0.0.2:26379, 10.0.0.1:26379]\n"},
			[]string{`redis.sentinel.addresses[2]: "10.0.0.1:26379" is listed twice (also at 0)`}},
		{"sentinel without addresses", map[string]string{"redis": "redis:\n  sentinel:\n    master_name: callouts\n"},
			[]string{"redis.sentinel.addresses: needs at least one Sentinel host:port"}},
		{"sentinel password unset", map[string]string{"redis": "redis:\n" + sentinel + "    password_env: NO_SUCH_VAR\n"},
			[]string{"redis.sentinel.password_env: "}},
	})
}

func TestDurabilityDefaultsAndSentinel(t *testing.T) {
	dir := keyFiles(t)
	over := map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/0\n"}
	cfg := mustParse(t, doc(over, dir), baseEnv().get)
	if cfg.Redis.Durability != config.DurabilityLocal || cfg.Redis.DurabilityTimeout != 0 {
		t.Errorf("defaults: durability %q, timeout %s; want local, none", cfg.Redis.Durability, cfg.Redis.DurabilityTimeout)
	}
	// replicated on a Cluster: acknowledged per primary (contract §11).
	over["redis"] = "redis:\n  cluster: [10.0.0.1:6379]\n  durability: replicated\n"
	if cfg = mustParse(t, doc(over, dir), baseEnv().get); cfg.Redis.DurabilityTimeout != time.Second {
		t.Errorf("replicated on a cluster: timeout %s, want the default 1s", cfg.Redis.DurabilityTimeout)
	}
	over["redis"] = "redis:\n  sentinel:\n    master_name: callouts\n    addresses: [10.0.0.1:26379, 10.0.0.2:26379]\n" +
		"    password_env: REDIS_PASSWORD\n  durability: replicated\n  durability_timeout: 250ms\n"
	cfg = mustParse(t, doc(over, dir), baseEnv().get)
	r := cfg.Redis
	if r.Embedded() || r.Durability != config.DurabilityReplicated || r.DurabilityTimeout != 250*time.Millisecond {
		t.Errorf("sentinel config: embedded %v, durability %q, timeout %s", r.Embedded(), r.Durability, r.DurabilityTimeout)
	}
	if got, want := r.String(), "sentinel callouts [10.0.0.1:26379, 10.0.0.2:26379]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	assertNoSecret(t, r.String())
}
