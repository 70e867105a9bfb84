package k8scheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const composeDir = "../compose"

func TestComposeKeepsPromises(t *testing.T) {
	c, err := ReadCompose(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range CheckCompose(c, composeDir) {
		t.Error(p)
	}
	if n := *c.Services["proxy"].Deploy.Replicas; n != 2 {
		t.Errorf("proxy replicas %d, want 2", n)
	}
}

// TestComposeCatchesBreakage breaks the compose file one way at a time.
func TestComposeCatchesBreakage(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		want     string
	}{
		{"one replica", "replicas: 2", "replicas: 1", "compose runs 1 proxy replicas, want at least 2"},
		{"short image name", "image: docker.io/library/redis:7.4-bookworm", "image: redis:7.4-bookworm",
			`service redis: image "redis:7.4-bookworm" is a short name`},
		{"short local name", "image: localhost/callout-proxy:dev", "image: callout-proxy:dev",
			`service proxy: image "callout-proxy:dev" is a short name`},
		{"no AOF", "--appendonly yes", "--appendonly no", "does not turn AOF on"},
		{"no data volume", "redis-data:/data", "redis-data:/var/tmp", "no volume on /data"},
		{"literal secret", "${CALLOUT_PROXY_ADMIN_TOKEN:?set CALLOUT_PROXY_ADMIN_TOKEN (at least 16 bytes)}",
			"literal-admin-token-value", "environment CALLOUT_PROXY_ADMIN_TOKEN must come from the host environment"},
		{"missing secret", "      CALLOUT_PROXY_JWT_SECRET:", "      UNUSED_JWT_SECRET:",
			"environment CALLOUT_PROXY_JWT_SECRET must come from the host environment"},
		{"config writable", "config.yaml:ro", "config.yaml:rw", "is not a read-only bind mount"},
		{"admin published", `"127.0.0.1:9081-9082:8081"`, `"9081-9082:8081"`, "publishes the admin port beyond loopback"},
		{"no depends_on", "depends_on:", "x-depends_on:", "service proxy does not depend_on redis"},
		{"root", `user: "65532:65532"`, `user: "0:0"`, "want a non-root uid"},
		{"no healthcheck", `      test: ["CMD", "/usr/local/bin/callout-proxy", "healthcheck"`, `      x-test: ["CMD", "/usr/local/bin/callout-proxy", "healthcheck"`,
			"service proxy: no healthcheck"},
		{"shell healthcheck", `test: ["CMD", "/usr/local/bin/callout-proxy", "healthcheck", "--config", "/etc/callout-proxy/config.yaml"]`,
			`test: ["CMD-SHELL", "wget -q -O- http://127.0.0.1:8080/healthz"]`, "needs a shell"},
	}
	text, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(string(text), tt.from) {
				t.Fatalf("compose.yaml no longer contains %q; update the test", tt.from)
			}
			dir := t.TempDir()
			writeFile(t, dir, "compose.yaml", strings.Replace(string(text), tt.from, tt.to, 1))
			cfg, err := os.ReadFile(filepath.Join(composeDir, "callout-proxy.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "callout-proxy.yaml", string(cfg))
			c, err := ReadCompose(filepath.Join(dir, "compose.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			problems := CheckCompose(c, dir)
			for _, p := range problems {
				if strings.Contains(p, tt.want) {
					return
				}
			}
			t.Errorf("no problem contains %q; got %q", tt.want, problems)
		})
	}
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
