package config_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
)

const examples = "../../deploy/examples"

func TestExampleDev(t *testing.T) {
	getenv := env{
		"CALLOUT_PROXY_JWT_SECRET":  jwtSecret,
		"CALLOUT_PROXY_ADMIN_TOKEN": adminSecret,
	}.get
	cfg, err := config.Load(filepath.Join(examples, "dev.yaml"), getenv)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := cfg.Endpoint("httpbin-local")
	checkAll(t, []check{
		{"listen", cfg.Listen, "127.0.0.1:8080"},
		{"admin_listen", cfg.AdminListen, "127.0.0.1:8081"},
		{"embedded redis", cfg.Redis.Embedded(), true},
		{"no salesforce", cfg.Salesforce == nil, true},
		{"algorithms", cfg.Auth.Algorithms, []string{"HS256"}},
		{"issuers", cfg.Auth.Issuers, []string{"https://dev.my.salesforce.com"}},
		{"audience", cfg.Auth.Audience, "callout-proxy"},
		{"admin token", cfg.Admin.Tokens, []config.AdminToken{{Name: "dev", TokenEnv: "CALLOUT_PROXY_ADMIN_TOKEN", Scope: "write"}}},
		{"endpoint", ok, true},
		{"endpoint names", cfg.EndpointNames(), []string{"httpbin-local"}},
		{"endpoint url", e.BaseURL.String(), "http://127.0.0.1:9000"},
		{"endpoint networks", e.Networks, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		{"policy", cfg.Policy, policy.Defaults()},
	})
}

func productionEnv() env {
	return env{
		"CALLOUT_PROXY_REDIS_PASSWORD": redisPassword,
		"CALLOUT_PROXY_ADMIN_TOKEN":    adminSecret,
		"PAYMENT_API_AUTH":             paymentSecret,
		"SF_CLIENT_ID":                 "3MVG9-consumer-key",
	}
}

// TestExampleProduction loads production.yaml with its secrets directory
// replaced by a temporary one holding stand-in certificate and key files.
func TestExampleProduction(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(examples, "production.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := keyFiles(t)
	for _, f := range []struct{ name, from string }{
		{"named-credential.crt", "cert.pem"}, {"sandbox-named-credential.crt", "cert.pem"}, {"sf-jwt.key", "key.pem"},
		{"admin-read.token", "secret.txt"}, {"erp-api-key", "secret.txt"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f.from))
		if err != nil {
			t.Fatal(err)
		}
		credtest.WriteFile(t, dir, f.name, b)
	}
	path := credtest.WriteFile(t, dir, "production.yaml", []byte(strings.ReplaceAll(string(text), "/etc/callout-proxy/secrets", dir)))
	cfg, err := config.Load(path, productionEnv().get)
	if err != nil {
		t.Fatal(err)
	}
	pay, erp := cfg.Endpoints["payment-api"], cfg.Endpoints["erp-internal"]
	checkAll(t, []check{
		{"redis", cfg.Redis.String(), "sentinel callouts [sentinel-0.internal.example.com:26379, " +
			"sentinel-1.internal.example.com:26379, sentinel-2.internal.example.com:26379]"},
		{"durability", cfg.Redis.Durability, config.DurabilityReplicated},
		{"sentinel tls", cfg.Redis.Sentinel.TLS, true},
		{"algorithms", cfg.Auth.Algorithms, []string{"RS256"}},
		{"certificates", cfg.Auth.IssuerKeys, []config.IssuerKeys{
			{Issuer: "https://example.my.salesforce.com", CertificateFiles: []string{filepath.Join(dir, "named-credential.crt")}},
			{Issuer: "https://example--uat.sandbox.my.salesforce.com", CertificateFiles: []string{filepath.Join(dir, "sandbox-named-credential.crt")}}}},
		{"tokens", len(cfg.Admin.Tokens), 2},
		{"policy", cfg.Policy, policy.Defaults()},
		{"payment attempt timeout", pay.AttemptTimeout, 20 * time.Second},
		{"payment header", pay.Headers, map[string]config.SecretRef{"Authorization": {Env: "PAYMENT_API_AUTH"}}},
		{"payment redact", pay.Redact, config.Redact{Headers: []string{"X-Card-Token"}, Query: []string{"api_key"}, JSONFields: []string{"card.number"}}},
		{"payment networks", len(pay.Networks), 0},
		{"erp idempotency", erp.Idempotency, "ignored"},
		{"erp networks", erp.Networks, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}},
		{"erp breaker", erp.BreakerFailures, 10},
		{"erp issuers", erp.AllowedIssuers, []string{"https://example.my.salesforce.com"}},
		{"salesforce", *cfg.Salesforce, config.Salesforce{LoginURL: "https://login.salesforce.com", ClientIDEnv: "SF_CLIENT_ID",
			Username: "integration@example.com", PrivateKeyFile: filepath.Join(dir, "sf-jwt.key"), APIVersion: "68.0",
			OutboxInterval: config.DefaultOutboxInterval, PollInterval: config.DefaultPollInterval,
			ReprocessInterval: config.DefaultReprocessInterval,
			APIUsageSlowdown:  config.DefaultAPIUsageSlowdown, SlowdownInterval: config.DefaultSlowdownInterval,
			LimitPause: config.DefaultLimitPause, RequestTimeout: config.DefaultRequestTimeout,
			BatchLinger: config.DefaultBatchLinger, BatchMaxBytes: config.DefaultBatchMaxBytes, PubSub: config.DefaultPubSub,
			FlushLease: config.DefaultFlushLease}},
	})
}

// TestExampleProductionReportsMissingFiles: as shipped, outside a
// deployment, every file under /etc/callout-proxy/secrets is missing, and
// each is reported under its own key.
func TestExampleProductionReportsMissingFiles(t *testing.T) {
	if _, err := os.Stat("/etc/callout-proxy/secrets"); err == nil {
		t.Skip("/etc/callout-proxy/secrets exists on this machine")
	}
	_, err := config.Load(filepath.Join(examples, "production.yaml"), productionEnv().get)
	var keys []string
	for _, p := range problems(t, err) {
		keys = append(keys, p.Key)
	}
	want := []string{"auth.issuer_keys[0].certificate_files[0]", "auth.issuer_keys[1].certificate_files[0]", "admin.tokens[1].token_file",
		"endpoints.erp-internal.headers.X-Api-Key", "salesforce.private_key_file"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v\n%v", keys, want, err)
	}
}
