package config_test

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
)

func TestParseFillsDefaults(t *testing.T) {
	cfg := mustParse(t, doc(map[string]string{"listen": ""}, ""), baseEnv().get)
	checkAll(t, []check{
		{"listen", cfg.Listen, "127.0.0.1:8080"},
		{"admin_listen", cfg.AdminListen, "127.0.0.1:8081"},
		{"policy", cfg.Policy, policy.Defaults()},
		{"max_token_lifetime", cfg.Auth.MaxTokenLifetime, time.Hour},
		{"leeway", cfg.Auth.Leeway, 30 * time.Second},
		{"redis embedded", cfg.Redis.Embedded(), true},
		{"no salesforce", cfg.Salesforce == nil, true},
		{"endpoint name", cfg.Endpoints["payment-api"].Name, "payment-api"},
		{"idempotency", cfg.Endpoints["payment-api"].Idempotency, config.IdempotencyHonoured},
		{"base url", cfg.Endpoints["payment-api"].BaseURL.String(), "https://api.example.com/v2"},
		{"connect", cfg.Endpoints["payment-api"].ConnectTimeout, 5 * time.Second},
		{"header", cfg.Endpoints["payment-api"].HeaderTimeout, 10 * time.Second},
		{"attempt", cfg.Endpoints["payment-api"].AttemptTimeout, 15 * time.Second},
		{"breaker failures", cfg.Endpoints["payment-api"].BreakerFailures, 20},
		{"probe interval", cfg.Endpoints["payment-api"].BreakerProbeInterval, 5 * time.Minute},
		{"networks", len(cfg.Endpoints["payment-api"].Networks), 0},
	})
}

func TestParseDefaultsAlgorithmsFromCertificates(t *testing.T) {
	dir := keyFiles(t)
	cfg := mustParse(t, doc(authWith("  certificate_files: [{{dir}}/cert.pem]\n"), dir), baseEnv().get)
	if want := []string{"RS256"}; !reflect.DeepEqual(cfg.Auth.Algorithms, want) {
		t.Errorf("algorithms = %v, want %v", cfg.Auth.Algorithms, want)
	}
}

func TestParseSalesforceDefaults(t *testing.T) {
	dir := keyFiles(t)
	cfg := mustParse(t, doc(map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n  client_id_env: SF_CLIENT_ID\n  username: a@example.com\n  private_key_file: {{dir}}/key.pem\n"}, dir), baseEnv().get)
	if cfg.Salesforce.APIVersion != "68.0" {
		t.Errorf("api_version = %q, want 68.0", cfg.Salesforce.APIVersion)
	}
	sf := cfg.Salesforce
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"outbox_interval", sf.OutboxInterval, time.Second}, {"poll_interval", sf.PollInterval, time.Minute},
		{"reprocess_interval", sf.ReprocessInterval, time.Minute},
		{"api_usage_slowdown", sf.APIUsageSlowdown, 0.8}, {"slowdown_interval", sf.SlowdownInterval, 30 * time.Second},
		{"limit_pause", sf.LimitPause, 15 * time.Minute}, {"request_timeout", sf.RequestTimeout, 30 * time.Second},
		{"webhook_url", sf.WebhookURL, ""}, {"audience", sf.Audience, ""},
		{"batch_linger", sf.BatchLinger, 2 * time.Second}, {"batch_max_bytes", sf.BatchMaxBytes, 8 << 20},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
}

// TestParsePartialPolicy: keys given replace their default, even with an
// explicit value equal to zero's neighbour; the others keep theirs.
func TestParsePartialPolicy(t *testing.T) {
	cfg := mustParse(t, doc(map[string]string{"policy": "policy:\n  max_attempts: 3\n  base_delay: 250ms\n  multiplier: 1.5\n"}, ""), baseEnv().get)
	want := policy.Defaults()
	want.MaxAttempts, want.BaseDelay, want.Multiplier = 3, 250*time.Millisecond, 1.5
	if cfg.Policy != want {
		t.Errorf("policy = %+v\nwant     %+v", cfg.Policy, want)
	}
}

func TestParseEndpointOverrides(t *testing.T) {
	cfg := mustParse(t, doc(map[string]string{
		"policy": "policy:\n  connect_timeout: 2s\n  breaker_failures: 7\n",
		"endpoints": `endpoints:
  inherits:
    url: https://a.example.com
  overrides:
    url: http://10.20.1.5:8443/api/
    idempotency: ignored
    allowed_networks: [10.20.0.0/16, "fd00::/8"]
    connect_timeout: 1s
    header_timeout: 30s
    attempt_timeout: 45s
    breaker_failures: 3
    breaker_probe_interval: 1m
    max_concurrency: 4
`,
	}, ""), baseEnv().get)
	in, out := cfg.Endpoints["inherits"], cfg.Endpoints["overrides"]
	type limits struct {
		connect, header, attempt, probe time.Duration
		failures                        int
	}
	tests := []struct {
		name string
		got  limits
		want limits
	}{
		{"inherits", limits{in.ConnectTimeout, in.HeaderTimeout, in.AttemptTimeout, in.BreakerProbeInterval, in.BreakerFailures},
			limits{2 * time.Second, 10 * time.Second, 15 * time.Second, 5 * time.Minute, 7}},
		{"overrides", limits{out.ConnectTimeout, out.HeaderTimeout, out.AttemptTimeout, out.BreakerProbeInterval, out.BreakerFailures},
			limits{time.Second, 30 * time.Second, 45 * time.Second, time.Minute, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %+v, want %+v", tt.got, tt.want)
			}
		})
	}
	wantNets := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00::/8")}
	if !reflect.DeepEqual(out.Networks, wantNets) || out.Idempotency != "ignored" || out.MaxConcurrency != 4 {
		t.Errorf("networks %v idempotency %q concurrency %d", out.Networks, out.Idempotency, out.MaxConcurrency)
	}
	if out.BaseURL.Host != "10.20.1.5:8443" || out.BaseURL.Path != "/api/" {
		t.Errorf("base url %v", out.BaseURL)
	}
}

// TestParseCanonicalisesHeaders: injected and redacted header names are
// canonical after Load.
func TestParseCanonicalisesHeaders(t *testing.T) {
	cfg := mustParse(t, doc(endpoint("    url: https://api.example.com/\n    headers:\n      x-api-key: {env: PAYMENT_AUTH}\n    redact: {headers: [x-card-token]}\n"), ""), baseEnv().get)
	e := cfg.Endpoints["payment-api"]
	if _, ok := e.Headers["X-Api-Key"]; !ok || len(e.Headers) != 1 {
		t.Errorf("headers = %v, want X-Api-Key only", e.Headers)
	}
	if !reflect.DeepEqual(e.Redact.Headers, []string{"X-Card-Token"}) {
		t.Errorf("redact headers = %v", e.Redact.Headers)
	}
}

// TestParseLiteralStrings: a plain scalar in a string field keeps its
// source text instead of being read as a number first.
func TestParseLiteralStrings(t *testing.T) {
	dir := keyFiles(t)
	cfg := mustParse(t, doc(map[string]string{
		"endpoints":  "endpoints:\n  a:\n    url: https://a.example.com\n    owner: 005000000000001\n",
		"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n  client_id_env: SF_CLIENT_ID\n  username: a@example.com\n  private_key_file: {{dir}}/key.pem\n  api_version: 61.0\n",
	}, dir), baseEnv().get)
	if got := cfg.Salesforce.APIVersion; got != "61.0" {
		t.Errorf("api_version = %q, want 61.0", got)
	}
	if got := cfg.Endpoints["a"].Owner; got != "005000000000001" {
		t.Errorf("owner = %q, want 005000000000001", got)
	}
}

// TestParseAliasedEndpoints: an endpoint that is a YAML alias of another
// gets its own copy, with its own name.
func TestParseAliasedEndpoints(t *testing.T) {
	cfg := mustParse(t, doc(map[string]string{"endpoints": "endpoints:\n  a: &shared {url: https://a.example.com}\n  b: *shared\n"}, ""), baseEnv().get)
	a, _ := cfg.Endpoint("a")
	b, _ := cfg.Endpoint("b")
	if a == b || a.Name != "a" || b.Name != "b" || b.URL != "https://a.example.com" {
		t.Errorf("a=%p %q, b=%p %q %q", a, a.Name, b, b.Name, b.URL)
	}
}

func TestEndpointLookup(t *testing.T) {
	cfg := mustParse(t, doc(nil, ""), baseEnv().get)
	tests := []struct {
		name string
		ok   bool
	}{{"payment-api", true}, {"Payment-API", false}, {"", false}, {"other", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := cfg.Endpoint(tt.name)
			if ok != tt.ok || (ok && e.Name != tt.name) || (!ok && e != nil) {
				t.Errorf("Endpoint(%q) = %v, %v", tt.name, e, ok)
			}
		})
	}
	if got := cfg.EndpointNames(); !reflect.DeepEqual(got, []string{"payment-api"}) {
		t.Errorf("EndpointNames = %v", got)
	}
	var none *config.Config
	if _, ok := none.Endpoint("payment-api"); ok {
		t.Error("nil Config found an endpoint")
	}
}

// TestLoadResolvesRelativePaths: Load reads relative paths from the
// configuration file's directory, and prefixes problems with the file.
func TestLoadResolvesRelativePaths(t *testing.T) {
	dir := keyFiles(t)
	text := doc(map[string]string{
		"auth":      "auth:\n  issuers: [https://a.my.salesforce.com]\n  audience: x\n  certificate_files: [cert.pem]\n",
		"endpoints": "endpoints:\n  a:\n    url: https://a.example.com\n    headers:\n      X-Key: {file: secret.txt}\n",
	}, dir)
	path := credtest.WriteFile(t, dir, "config.yaml", []byte(text))
	cfg, err := config.Load(path, baseEnv().get)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Auth.CertificateFiles[0], filepath.Join(dir, "cert.pem"); got != want {
		t.Errorf("certificate file = %q, want %q", got, want)
	}
	ref := cfg.Endpoints["a"].Headers["X-Key"]
	if v, err := ref.Resolve(nil); err != nil || v != fileSecret {
		t.Errorf("header secret resolved to %v (err %v)", v == fileSecret, err)
	}

	bad := credtest.WriteFile(t, dir, "bad.yaml", []byte(strings.Replace(text, "audience: x", "audience: ''", 1)))
	_, err = config.Load(bad, baseEnv().get)
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].Error() != bad+":5: auth.audience: required" {
		t.Errorf("got %q", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := config.Load(path, nil)
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].File != path || !strings.Contains(ps[0].Msg, "no such file") {
		t.Errorf("got %v", err)
	}
}

// TestPrepareCodeBuiltConfig: a Config built in code from Default gets the
// same derived values as a parsed one.
func TestPrepareCodeBuiltConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Auth.Issuers = []string{"https://a.my.salesforce.com"}
	cfg.Auth.Audience = "callout-proxy"
	cfg.Auth.Algorithms = []string{"HS256"}
	cfg.Auth.HS256SecretEnv = "JWT_SECRET"
	cfg.Endpoints = map[string]*config.Endpoint{"up": {URL: "http://127.0.0.1:9/x", AllowedNetworks: []string{"127.0.0.0/8"}}}
	if err := cfg.Prepare(baseEnv().get); err != nil {
		t.Fatal(err)
	}
	e := cfg.Endpoints["up"]
	if e.Name != "up" || e.BaseURL == nil || len(e.Networks) != 1 || e.AttemptTimeout != 15*time.Second {
		t.Errorf("endpoint not prepared: %+v", e)
	}
	cfg.Endpoints["up"].URL = "ftp://x"
	ps := problems(t, cfg.Prepare(baseEnv().get))
	if len(ps) != 1 || ps[0].Error() != "endpoints.up.url: scheme must be http or https" {
		t.Errorf("got %v", ps)
	}
}

// TestEndpointLowersAttemptTimeoutAlone: an endpoint that sets only
// attempt_timeout below the inherited connect and header limits is valid;
// those inherited limits shrink to fit (contract §3: an endpoint may lower its
// limits), while limits it sets itself are still checked as written.
func TestEndpointLowersAttemptTimeoutAlone(t *testing.T) {
	base := `auth: {issuers: [https://a.my.salesforce.com], audience: x, algorithms: [HS256], hs256_secret_env: S}
endpoints:
  fast:
    url: https://api.example.com
    attempt_timeout: 2s
`
	env := func(k string) string { return strings.Repeat("s", 40) }
	cfg, err := config.Parse([]byte(base), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	ep, _ := cfg.Endpoint("fast")
	if ep.AttemptTimeout != 2*time.Second || ep.HeaderTimeout != 2*time.Second || ep.ConnectTimeout != 2*time.Second {
		t.Errorf("limits = connect %s, header %s, attempt %s; want all 2s", ep.ConnectTimeout, ep.HeaderTimeout, ep.AttemptTimeout)
	}
	_, err = config.Parse([]byte(base+"    header_timeout: 3s\n"), env)
	if err == nil || !strings.Contains(err.Error(), "header_timeout") {
		t.Errorf("an explicit header_timeout over attempt_timeout: err = %v, want one naming header_timeout", err)
	}
}

// The per-organisation backlog shares (contract §10) default to a fair share:
// the endpoint's cap divided by the issuers allowed on it, no separate cap
// when only one organisation may use it, and an explicit value as written.
func TestParseBacklogSharesPerIssuer(t *testing.T) {
	endpoints := `endpoints:
  shared:
    url: https://api.example.com/v2
    max_backlog_items: 1000
    max_backlog_bytes: 1000000
  one-org:
    url: https://api.example.com/v2
    allowed_issuers: [https://example.my.salesforce.com]
  set:
    url: https://api.example.com/v2
    max_backlog_items_per_issuer: 7
    max_backlog_bytes_per_issuer: 4096
`
	cfg := mustParse(t, doc(map[string]string{"endpoints": endpoints}, ""), baseEnv().get)
	tests := []struct {
		endpoint     string
		items, bytes int64
	}{
		{"shared", 500, 500000}, // two issuers in auth.issuers
		{"one-org", 0, 0},
		{"set", 7, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			b := cfg.Endpoints[tt.endpoint].Rules().Backlog
			if b.MaxItemsPerIssuer != tt.items || b.MaxBytesPerIssuer != tt.bytes {
				t.Errorf("per-issuer caps = %d items %d bytes, want %d and %d", b.MaxItemsPerIssuer, b.MaxBytesPerIssuer, tt.items, tt.bytes)
			}
		})
	}
	if _, err := config.Parse([]byte(doc(map[string]string{"endpoints": `endpoints:
  neg:
    url: https://api.example.com/v2
    max_backlog_bytes_per_issuer: -1
`}, "")), baseEnv().get); err == nil || !strings.Contains(err.Error(), "endpoints.neg.max_backlog_items_per_issuer") {
		t.Errorf("a negative share: %v, want an error naming the key", err)
	}
}
