// Package config reads the proxy's YAML configuration (SPEC.md §10), fills in
// defaults and validates it, naming the key and what is wrong. Secrets are
// never inline: they are SecretRefs to an environment variable or a file.
package config

import (
	"net/netip"
	"net/url"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Config is the whole configuration file. Load returns it with every default
// filled in and every endpoint's effective per-attempt and breaker limits set.
type Config struct {
	// Listen is the callout listener (callouts, /v1/, /healthz, /readyz).
	// Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// AdminListen is the admin listener (/admin/v1/, /metrics).
	// Default 127.0.0.1:8081.
	AdminListen string `yaml:"admin_listen"`
	// TLSCertFile and TLSKeyFile, both set, serve Listen over TLS.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// Redis says where the store is; neither URL nor Cluster: embedded.
	Redis Redis `yaml:"redis"`
	// Auth configures caller (Named Credential JWT) authentication.
	Auth Auth `yaml:"auth"`
	// Admin configures the admin API's bearer tokens.
	Admin Admin `yaml:"admin"`
	// Policy is the retry, breaker and size policy; defaults per SPEC §10.
	Policy policy.Policy `yaml:"policy"`
	// Endpoints is the allow-list, by endpoint name
	// (^[a-z0-9][a-z0-9-]{0,62}$).
	Endpoints map[string]*Endpoint `yaml:"endpoints"`
	// Salesforce, when nil, keeps dead letters in the proxy's own store.
	Salesforce *Salesforce `yaml:"salesforce"`
}

// Redis locates the store. At most one of URL and Cluster is set.
type Redis struct {
	// URL is a redis:// or rediss:// URL for a single node.
	URL string `yaml:"url"`
	// Cluster lists host:port seeds of a Redis Cluster.
	Cluster []string `yaml:"cluster"`
	// PasswordEnv names an environment variable holding the password, for
	// when it should not sit in the URL.
	PasswordEnv string `yaml:"password_env"`
}

// Embedded reports whether no Redis is configured and the embedded,
// non-durable in-memory store must be used.
func (r Redis) Embedded() bool { return r.URL == "" && len(r.Cluster) == 0 }

// Auth configures caller authentication (SPEC §9).
type Auth struct {
	// Issuers are the allowed `iss` values: one per Salesforce org.
	Issuers []string `yaml:"issuers"`
	// Audience is the required `aud`.
	Audience string `yaml:"audience"`
	// Algorithms allowed: RS256, RS512 (need CertificateFiles) and HS256
	// (needs HS256SecretEnv or HS256SecretFile).
	Algorithms []string `yaml:"algorithms"`
	// CertificateFiles are PEM files, each a CERTIFICATE or PUBLIC KEY block;
	// several allow rotation.
	CertificateFiles []string `yaml:"certificate_files"`
	// HS256SecretEnv names the environment variable holding the HS256 secret.
	HS256SecretEnv string `yaml:"hs256_secret_env"`
	// HS256SecretFile is a file holding the HS256 secret (alternative to env).
	HS256SecretFile string `yaml:"hs256_secret_file"`
	// MaxTokenLifetime bounds exp − iat (or exp − nbf). Default 1h.
	MaxTokenLifetime time.Duration `yaml:"max_token_lifetime"`
	// Leeway tolerated on exp, nbf and iat for clock skew. Default 30s.
	Leeway time.Duration `yaml:"leeway"`
}

// Admin configures the admin API.
type Admin struct {
	// Tokens are the named bearer tokens of the admin API.
	Tokens []AdminToken `yaml:"tokens"`
}

// AdminToken is one named admin bearer token.
type AdminToken struct {
	// Name identifies the token in the audit log.
	Name string `yaml:"name"`
	// TokenEnv and TokenFile say where the token's value is (one of them).
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// Scope is "read" or "write"; write includes read.
	Scope string `yaml:"scope"`
}

// SecretRef points at a secret value: an environment variable or a file
// (whose content is trimmed of one trailing newline). Exactly one is set.
type SecretRef struct {
	Env  string `yaml:"env"`
	File string `yaml:"file"`
}

// Endpoint is one allow-listed upstream API.
type Endpoint struct {
	// Name is the endpoint's key in Endpoints (filled in by Load).
	Name string `yaml:"-"`
	// URL is the upstream base URL (http or https, no query, no fragment,
	// no user info); the caller's path is appended below its path.
	URL string `yaml:"url"`
	// BaseURL is URL parsed (filled in by Load).
	BaseURL *url.URL `yaml:"-"`
	// Owner is the Salesforce user id told of outages.
	Owner string `yaml:"owner"`
	// Idempotency is "honoured" (default) or "ignored" (SPEC §3).
	Idempotency string `yaml:"idempotency"`
	// AllowedNetworks are CIDRs besides public addresses that this
	// endpoint may reach (loopback and private ranges are blocked otherwise).
	AllowedNetworks []string `yaml:"allowed_networks"`
	// Networks is AllowedNetworks parsed (filled in by Load).
	Networks []netip.Prefix `yaml:"-"`
	// AllowedIssuers restricts callers to these issuers; empty: all.
	AllowedIssuers []string `yaml:"allowed_issuers"`
	// Per-attempt limits and breaker settings; zero inherits Policy. After
	// Load they hold the effective values.
	ConnectTimeout       time.Duration `yaml:"connect_timeout"`
	HeaderTimeout        time.Duration `yaml:"header_timeout"`
	AttemptTimeout       time.Duration `yaml:"attempt_timeout"`
	BreakerFailures      int           `yaml:"breaker_failures"`
	BreakerProbeInterval time.Duration `yaml:"breaker_probe_interval"`
	// MaxConcurrency bounds concurrent dispatcher attempts to this endpoint
	// per replica; zero: the dispatcher's default.
	MaxConcurrency int `yaml:"max_concurrency"`
	// Headers are injected upstream on every attempt; callers can neither
	// override nor remove them.
	Headers map[string]SecretRef `yaml:"headers"`
	// Redact names what is hidden on every way out (SPEC §7).
	Redact Redact `yaml:"redact"`
}

// Redact lists per-endpoint secrets to hide in status documents, logs,
// dead letters and Salesforce records.
type Redact struct {
	Headers    []string `yaml:"headers"`
	Query      []string `yaml:"query"`
	JSONFields []string `yaml:"json_fields"`
}

// Salesforce configures the Salesforce REST connection (JWT bearer flow).
type Salesforce struct {
	LoginURL       string `yaml:"login_url"`
	ClientIDEnv    string `yaml:"client_id_env"`
	Username       string `yaml:"username"`
	PrivateKeyFile string `yaml:"private_key_file"`
	APIVersion     string `yaml:"api_version"`
}
