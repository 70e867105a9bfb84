// Package deploy holds no code: its test loads every proxy configuration
// shipped under deploy/ (compose, Kubernetes base and overlay) with the
// proxy's own loader, so a manifest never carries a configuration the proxy
// would refuse. The Kubernetes and compose structure is checked by the
// separate module in deploy/k8s-check; deploy/check.sh runs both.
package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
)

// secretDir matches a secret file under the directories the shipped configurations read secret
// files from (Secret volumes in Kubernetes).
var secretDir = regexp.MustCompile(`/etc/callout-proxy/(secrets|upstream-secrets)/([A-Za-z0-9._-]+)`)

// TestShippedConfigsLoad loads each configuration with config.Load. Every
// environment variable resolves to a distinct 48-byte value; every secret
// file is created in a temporary directory (a certificate for .crt, a
// private key for .key, a token otherwise) and the paths rewritten to it.
func TestShippedConfigsLoad(t *testing.T) {
	tests := []struct {
		file, listen, adminListen string
		redis                     string
		endpoints                 []string
		salesforce                bool
		longestWait               time.Duration
	}{
		{"compose/callout-proxy.yaml", "0.0.0.0:8080", "0.0.0.0:8081", "redis://redis:6379/0",
			[]string{"example-api"}, false, 15 * time.Second},
		{"k8s/base/callout-proxy.yaml", ":8080", ":8081", "redis://callout-redis:6379/0",
			[]string{"example-api"}, true, 15 * time.Second},
		{"k8s/overlays/example/callout-proxy.yaml", ":8080", ":8081", "sentinel callouts [" + strings.Join([]string{
			"callout-redis-0.callout-redis.callout-proxy.svc:26379",
			"callout-redis-1.callout-redis.callout-proxy.svc:26379",
			"callout-redis-2.callout-redis.callout-proxy.svc:26379"}, ", ") + "]",
			[]string{"erp-internal", "payment-api"}, true, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg, err := config.Load(rewriteSecrets(t, tt.file), envFor)
			if err != nil {
				t.Fatal(err)
			}
			longest := cfg.Policy.AttemptTimeout
			for _, name := range cfg.EndpointNames() {
				e, _ := cfg.Endpoint(name)
				longest = max(longest, e.AttemptTimeout)
			}
			checks := []struct {
				name      string
				got, want any
			}{
				{"listen", cfg.Listen, tt.listen},
				{"admin_listen", cfg.AdminListen, tt.adminListen},
				{"redis", cfg.Redis.String(), tt.redis},
				{"endpoints", strings.Join(cfg.EndpointNames(), ","), strings.Join(tt.endpoints, ",")},
				{"salesforce", cfg.Salesforce != nil, tt.salesforce},
				{"longest attempt", longest, tt.longestWait},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
				}
			}
		})
	}
}

// envFor gives every variable a distinct value of 48 bytes: long enough
// for HS256 (32) and admin tokens (16), different for each token.
func envFor(name string) string {
	return (name + strings.Repeat("x", 48))[:48]
}

// rewriteSecrets copies file into a temporary directory with every secret
// path pointing at a stand-in file there, and returns the copy's path.
func rewriteSecrets(t *testing.T, file string) string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := certificate(t)
	out := secretDir.ReplaceAllStringFunc(string(text), func(p string) string {
		name := secretDir.FindStringSubmatch(p)[2]
		content := "a-stand-in-secret-token-0123456789-" + name
		switch filepath.Ext(name) {
		case ".crt":
			content = cert
		case ".key":
			content = key
		}
		credtest.WriteFile(t, dir, name, []byte(content))
		return filepath.Join(dir, name)
	})
	return credtest.WriteFile(t, dir, "config.yaml", []byte(out))
}

// certificate returns a self-signed certificate and its PKCS #8 private
// key, PEM-encoded.
func certificate(t *testing.T) (certPEM, keyPEM string) {
	c, k := credtest.SelfSigned(t, "deploy test")
	return string(c), string(k)
}
