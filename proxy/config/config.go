// Package config reads the proxy's YAML configuration (contract §10), fills in
// defaults and validates it, naming the key and what is wrong. Secrets are
// never inline: they are SecretRefs to an environment variable or a file,
// and nothing in this package ever prints a secret's value.
//
// Load (or Parse) is the one entry point: it decodes strictly (an unknown key
// is an error with its line), fills in every default, validates every key,
// and checks that every secret and file the configuration names can be read,
// reporting all problems at once. A *Config it returns is complete: the
// derived fields (Endpoint.Name, BaseURL, Networks, the effective per-endpoint
// limits) are set and need no further checks.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Config is the whole configuration file. Load returns it with every default
// filled in and every endpoint's effective per-attempt and breaker limits set.
// It holds no secret values, only references to them.
//
// A field added here (or in the types it holds, policy.Policy included) is
// read from the file only if it has a `yaml:"key"` tag: the strict check
// knows keys by their tags and reports any other key as unknown.
type Config struct {
	// Listen is the callout listener (callouts, /v1/, /healthz, /readyz), a
	// host:port for net.Listen; port 0 picks a free port.
	// Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// AdminListen is the admin listener (/admin/v1/, /metrics), a host:port.
	// It must differ from Listen. Default 127.0.0.1:8081.
	AdminListen string `yaml:"admin_listen"`
	// TLSCertFile and TLSKeyFile, both set, serve Listen over TLS (PEM files;
	// Load checks they load as a matching pair). Both empty: plain HTTP, TLS
	// terminated by the ingress (contract §10).
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// Redis says where the store is; neither URL nor Cluster: embedded.
	Redis Redis `yaml:"redis"`
	// Auth configures caller (Named Credential JWT) authentication.
	Auth Auth `yaml:"auth"`
	// Admin configures the admin API's bearer tokens.
	Admin Admin `yaml:"admin"`
	// Policy is the retry, breaker and size policy; every key not given keeps
	// its default from policy.Defaults (contract §3, §10).
	Policy policy.Policy `yaml:"policy"`
	// Log says what the proxy logs (log.access: which attempts get a line).
	Log Log `yaml:"log"`
	// Limits protect every caller from every other: listener timeouts,
	// connection caps, header limits, the memory budget (contract §10).
	Limits Limits `yaml:"limits"`
	// Endpoints is the allow-list, by endpoint name
	// (^[a-z0-9][a-z0-9-]{0,62}$). At least one is required.
	Endpoints map[string]*Endpoint `yaml:"endpoints"`
	// Salesforce, when nil, keeps dead letters in the proxy's own store. An
	// empty `salesforce:` key is the same as none.
	Salesforce *Salesforce `yaml:"salesforce"`
	// Tracing configures OpenTelemetry tracing; off unless its endpoint is
	// set (docs/tracing.md).
	Tracing Tracing `yaml:"tracing"`
	// Fingerprint names the text this configuration was read from: the
	// first 16 hex digits of the SHA-256 of the file's bytes (Load and
	// Parse set it; empty for a Config built in code). /healthz reports
	// the one in force and `callout-proxy healthcheck --config FILE`
	// compares it with FILE's (docs/operating.md).
	Fingerprint string `yaml:"-"`
}

// Fingerprint is the fingerprint of a configuration file's bytes: the
// first 16 hex digits of their SHA-256 (Config.Fingerprint).
func Fingerprint(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Default returns what an empty file decodes to before validation: Listen
// 127.0.0.1:8080, AdminListen 127.0.0.1:8081, Policy policy.Defaults(),
// Auth.MaxTokenLifetime 1h, Auth.Leeway 30s, Tracing.SampleRatio 1 and
// Log.CollapseInterval 1m. Parse decodes the file onto it, so a key given in
// the file (even as 0) replaces the default and a key left out keeps it.
func Default() *Config {
	return &Config{
		Listen:      "127.0.0.1:8080",
		AdminListen: "127.0.0.1:8081",
		Auth:        Auth{MaxTokenLifetime: DefaultMaxTokenLifetime, Leeway: DefaultLeeway},
		Policy:      policy.Defaults(),
		Tracing:     Tracing{SampleRatio: DefaultTracingSampleRatio},
		Log:         Log{CollapseInterval: DefaultCollapseInterval},
	}
}

// Endpoint returns the endpoint called name, and whether there is one.
// Names are case-sensitive: "Payment-API" is not "payment-api".
func (c *Config) Endpoint(name string) (*Endpoint, bool) {
	if c == nil {
		return nil, false
	}
	e, ok := c.Endpoints[name]
	return e, ok && e != nil
}

// EndpointNames returns the endpoint names in ascending byte order.
func (c *Config) EndpointNames() []string {
	if c == nil {
		return nil
	}
	return sortedKeys(c.Endpoints)
}

// Redis locates the store and says how durable an acknowledgement is. At
// most one of URL, Cluster and Sentinel is set.
type Redis struct {
	// URL is a redis:// or rediss:// URL for a single node, with an optional
	// database number as its path (redis://host:6379/0). A password may sit
	// in the URL's user info, but PasswordEnv keeps it out of the file.
	URL string `yaml:"url"`
	// Cluster lists host:port seeds of a Redis Cluster.
	Cluster []string `yaml:"cluster"`
	// PasswordEnv names an environment variable holding the password, for
	// when it should not sit in the URL. Not with a password in URL.
	PasswordEnv string `yaml:"password_env"`
	// GateStaleness bounds how old this replica's cached view of an
	// endpoint's gate (breaker, pause, disable) may be when a read uses it
	// without asking Redis: a breaker opened on another replica refuses
	// reads here within this time (at once when its pub/sub message
	// arrives). The backstop poll runs every half of it. Default 100ms;
	// 0 means the default; 10ms to 10s.
	GateStaleness time.Duration `yaml:"gate_staleness"`
	// Sentinel locates a primary with replicas through Redis Sentinel
	// (go-redis's failover client follows a promotion). Not with URL or
	// Cluster.
	Sentinel *Sentinel `yaml:"sentinel"`
	// Durability is what an acknowledged callout survives (contract §1,
	// §11): DurabilityLocal (default), DurabilityReplicated or
	// DurabilityFsync.
	Durability string `yaml:"durability"`
	// DurabilityTimeout bounds how long a write waits for its replicas'
	// (or the append-only file's) confirmation before the caller gets 503
	// store-unavailable. Default 1s; 0 means the default; 10ms to 10s.
	// Only with replicated or fsync: set with local it is refused.
	DurabilityTimeout time.Duration `yaml:"durability_timeout"`
}

// Sentinel names the primary that Redis Sentinels watch.
type Sentinel struct {
	// MasterName is the name the Sentinels monitor the primary under.
	MasterName string `yaml:"master_name"`
	// Addresses are host:port of Sentinels (at least one; three or more in
	// production, so a majority can agree on a failover).
	Addresses []string `yaml:"addresses"`
	// PasswordEnv names an environment variable holding the Sentinels' own
	// password (requirepass of the Sentinels); the data nodes' password is
	// Redis.PasswordEnv.
	PasswordEnv string `yaml:"password_env"`
	// TLS makes every connection, to the Sentinels and to the data nodes,
	// TLS 1.2+ verified against the system roots (as rediss:// does for
	// URL). Default false.
	TLS bool `yaml:"tls"`
}

// Values of Redis.Durability (contract §1, §11).
const (
	// DurabilityLocal: a callout is acknowledged once the primary ran its
	// script; what survives is what the primary's appendfsync keeps.
	DurabilityLocal = "local"
	// DurabilityReplicated: each acknowledging write is confirmed by at
	// least one replica (WAIT, grouped) before the caller is answered.
	// A primary with replicas (url or Sentinel), or a Cluster (per primary).
	DurabilityReplicated = "replicated"
	// DurabilityFsync: each acknowledging write is fsynced to the
	// primary's append-only file, and with Sentinel to one replica's too
	// (WAITAOF), before the caller is answered. Needs Redis 7.2 or later.
	DurabilityFsync = "fsync"
)

// Defaults and bounds of Redis.DurabilityTimeout.
const (
	DefaultDurabilityTimeout = time.Second
	MinDurabilityTimeout     = 10 * time.Millisecond
	MaxDurabilityTimeout     = 10 * time.Second
)

// Bounds of Redis.GateStaleness.
const (
	DefaultGateStaleness = 100 * time.Millisecond
	MinGateStaleness     = 10 * time.Millisecond
	MaxGateStaleness     = 10 * time.Second
)

// Embedded reports whether no Redis is configured and the embedded,
// non-durable in-memory store must be used.
func (r Redis) Embedded() bool { return r.URL == "" && len(r.Cluster) == 0 && r.Sentinel == nil }

// String describes the store for logs: "embedded", the URL with any
// password replaced by "xxxxx" (url.URL.Redacted), "cluster [seeds]" or
// "sentinel master-name [addresses]".
// fmt uses it for Redis values nested in a printed Config, too.
func (r Redis) String() string {
	switch {
	case r.URL != "":
		u, err := url.Parse(r.URL)
		if err != nil {
			return "redis (unparsable url)"
		}
		return u.Redacted()
	case len(r.Cluster) > 0:
		return "cluster [" + strings.Join(r.Cluster, ", ") + "]"
	case r.Sentinel != nil:
		return "sentinel " + r.Sentinel.MasterName + " [" + strings.Join(r.Sentinel.Addresses, ", ") + "]"
	}
	return "embedded"
}

// Auth configures caller authentication (contract §9).
type Auth struct {
	// Issuers are the allowed `iss` values: one per Salesforce org. At least
	// one is required.
	Issuers []string `yaml:"issuers"`
	// Audience is the required `aud`.
	Audience string `yaml:"audience"`
	// Algorithms allowed: RS256, RS512 (need CertificateFiles) and HS256
	// (needs HS256SecretEnv or HS256SecretFile). Default [RS256] when
	// CertificateFiles are given; otherwise it must be set.
	Algorithms []string `yaml:"algorithms"`
	// CertificateFiles are PEM files, each a CERTIFICATE or PUBLIC KEY block;
	// several allow rotation.
	CertificateFiles []string `yaml:"certificate_files"`
	// HS256SecretEnv names the environment variable holding the HS256 secret
	// (at least 32 bytes, RFC 7518 §3.2).
	HS256SecretEnv string `yaml:"hs256_secret_env"`
	// HS256SecretFile is a file holding the HS256 secret (alternative to env).
	HS256SecretFile string `yaml:"hs256_secret_file"`
	// IssuerKeys binds key material to the issuer it may sign for: a token
	// verifies only under a key bound to its own `iss` (contract §9). The
	// top-level CertificateFiles and HS256 secret are bound to the issuer
	// when Issuers has one entry; with several, every key must be listed
	// here, under its issuer (Validate refuses an unbound key).
	IssuerKeys []IssuerKeys `yaml:"issuer_keys"`
	// MaxTokenLifetime bounds exp − iat (or exp − nbf). Default 1h; 0 means
	// the default.
	MaxTokenLifetime time.Duration `yaml:"max_token_lifetime"`
	// Leeway tolerated on exp, nbf and iat for clock skew. Default 30s; 0
	// means the default (use 1s for almost none). Must be below
	// MaxTokenLifetime.
	Leeway time.Duration `yaml:"leeway"`
	// TokenCacheEntries bounds how many verified caller tokens are
	// remembered (by SHA-256, until their exp) so a token reused across
	// requests is verified once. Default 10000; 0 means the
	// default; past it a new token evicts an entry (proxy/auth cache.go).
	TokenCacheEntries int `yaml:"token_cache_entries"`
}

// IssuerKeys is the verification key material of one issuer (contract §9,
// auth.issuer_keys): certificate files for RS256/RS512 and/or an HS256
// secret, as in Auth. A key that signs for two issuers is listed under each.
type IssuerKeys struct {
	// Issuer is one of auth.issuers.
	Issuer string `yaml:"issuer"`
	// CertificateFiles are PEM files, as Auth.CertificateFiles.
	CertificateFiles []string `yaml:"certificate_files"`
	// HS256SecretEnv and HS256SecretFile say where this issuer's HS256
	// secret is (one of them), as in Auth.
	HS256SecretEnv  string `yaml:"hs256_secret_env"`
	HS256SecretFile string `yaml:"hs256_secret_file"`
	// path is the configuration key the entry came from, for errors:
	// "auth" for the top-level keys, "auth.issuer_keys[i]" otherwise.
	path string
}

// HS256Ref returns where the issuer's HS256 secret is, as a SecretRef.
func (k IssuerKeys) HS256Ref() SecretRef {
	return SecretRef{Env: k.HS256SecretEnv, File: k.HS256SecretFile}
}

// Path is the configuration key the entry came from: "auth" for the
// top-level keys of a single-issuer configuration, "auth.issuer_keys[i]"
// otherwise; error messages name it.
func (k IssuerKeys) Path() string { return k.path }

// secretKey is the configuration key of the entry's HS256 secret under
// path: hs256_secret_file when that is the one set, else hs256_secret_env,
// so an error names the key the operator wrote.
func (k IssuerKeys) secretKey(path string) string {
	if k.HS256SecretFile != "" && k.HS256SecretEnv == "" {
		return join(path, "hs256_secret_file")
	}
	return join(path, "hs256_secret_env")
}

// hasKeys reports whether the entry configures any key material.
func (k IssuerKeys) hasKeys() bool {
	return len(k.CertificateFiles) > 0 || k.HS256SecretEnv != "" || k.HS256SecretFile != ""
}

// Bindings returns every key binding of a: the top-level key material
// bound to the sole issuer (only when auth.issuers has exactly one entry;
// with several, top-level keys are bound to none and Validate refuses
// them), then each auth.issuer_keys entry. Contract §9.
func (a Auth) Bindings() []IssuerKeys {
	var out []IssuerKeys
	top := IssuerKeys{CertificateFiles: a.CertificateFiles, HS256SecretEnv: a.HS256SecretEnv,
		HS256SecretFile: a.HS256SecretFile, path: "auth"}
	if len(a.Issuers) == 1 && top.hasKeys() {
		top.Issuer = a.Issuers[0]
		out = append(out, top)
	}
	for i, k := range a.IssuerKeys {
		k.path = index("auth.issuer_keys", i)
		out = append(out, k)
	}
	return out
}

// Admin configures the admin API.
type Admin struct {
	// Tokens are the named bearer tokens of the admin API. None: only
	// /metrics (which needs no token) is usable on admin_listen.
	Tokens []AdminToken `yaml:"tokens"`
	// Pprof serves Go's profiler (net/http/pprof) under /debug/pprof/ on
	// the admin listener, to tokens of scope write only, each request
	// audit-logged. Default false.
	Pprof bool `yaml:"pprof"`
}

// AdminToken is one named admin bearer token.
type AdminToken struct {
	// Name identifies the token in the audit log; unique among tokens.
	Name string `yaml:"name"`
	// TokenEnv and TokenFile say where the token's value is (one of them).
	// The value must be at least 16 characters long and differ from every
	// other token's.
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// Scope is "read" or "write"; write includes read.
	Scope string `yaml:"scope"`
}

// SecretRef points at a secret value: an environment variable or a file
// (whose content is trimmed of one trailing newline). Exactly one is set.
type SecretRef struct {
	// Env names an environment variable that must be set and non-empty.
	Env string `yaml:"env"`
	// File is a path to a file holding the value (at most 64 KiB). Load
	// resolves a relative path against the configuration file's directory.
	File string `yaml:"file"`
}

// String describes where the secret is ("env NAME", "file PATH"), never
// what it is.
func (s SecretRef) String() string {
	switch {
	case s.Env != "" && s.File != "":
		return "env " + s.Env + " and file " + s.File
	case s.Env != "":
		return "env " + s.Env
	case s.File != "":
		return "file " + s.File
	}
	return "no secret"
}

// MaxShards is the most shards one endpoint may have (endpoints.*.shards).
const MaxShards = 64

// Endpoint is one allow-listed upstream API.
type Endpoint struct {
	// Name is the endpoint's key in Endpoints (filled in by Load).
	Name string `yaml:"-"`
	// URL is the upstream base URL (http or https, no query, no fragment,
	// no user info); the caller's path is appended below its path.
	URL string `yaml:"url"`
	// BaseURL is URL parsed (filled in by Load).
	BaseURL *url.URL `yaml:"-"`
	// Owner is the Salesforce user id (15 or 18 characters, prefix 005)
	// told of outages. Optional.
	Owner string `yaml:"owner"`
	// Idempotency is "honoured" (default) or "ignored" (contract §3).
	Idempotency string `yaml:"idempotency"`
	// AllowedNetworks are CIDRs besides public addresses that this
	// endpoint may reach (loopback and private ranges are blocked otherwise).
	// Each must be a network address (10.20.0.0/16, not 10.20.1.2/16).
	// Cloud metadata addresses stay blocked whatever is listed (contract §10).
	AllowedNetworks []string `yaml:"allowed_networks"`
	// Networks is AllowedNetworks parsed (filled in by Load).
	Networks []netip.Prefix `yaml:"-"`
	// AllowedIssuers restricts callers to these issuers, each one of
	// auth.issuers; empty: all.
	AllowedIssuers []string `yaml:"allowed_issuers"`
	// Per-attempt limits and breaker settings; zero inherits Policy. After
	// Load they hold the effective values. Negative values are errors, and
	// the effective connect and header timeouts may not exceed the effective
	// attempt timeout.
	ConnectTimeout       time.Duration `yaml:"connect_timeout"`
	HeaderTimeout        time.Duration `yaml:"header_timeout"`
	AttemptTimeout       time.Duration `yaml:"attempt_timeout"`
	BreakerFailures      int           `yaml:"breaker_failures"`
	BreakerProbeInterval time.Duration `yaml:"breaker_probe_interval"`
	// Breaker is the endpoint's breaker partitioning (contract §6).
	Breaker EndpointBreaker `yaml:"breaker"`
	// MaxConcurrency bounds concurrent dispatcher attempts to this endpoint
	// per replica; zero: the dispatcher's default.
	MaxConcurrency int `yaml:"max_concurrency"`
	// Shards spreads this endpoint's queue over this many Redis hash tags
	// (1 … 64), so a Redis Cluster spreads one busy endpoint over several
	// primaries (docs/performance.md); zero or absent: 1. The breaker and
	// gate stay one per endpoint; each shard enforces 1/Shards of the
	// backlog caps.
	Shards int `yaml:"shards"`
	// MaxBacklogItems and MaxBacklogBytes cap this endpoint's pending
	// callouts (scheduled, held, in flight) and their request bodies'
	// bytes; zero inherits policy.max_backlog_items / max_backlog_bytes.
	MaxBacklogItems int64 `yaml:"max_backlog_items"`
	MaxBacklogBytes int64 `yaml:"max_backlog_bytes"`
	// MaxBacklogItemsPerIssuer and MaxBacklogBytesPerIssuer cap one caller
	// organisation's (JWT issuer's) share of this endpoint's backlog; zero
	// inherits policy, and zero there is a fair share (Load: the endpoint's
	// cap divided by the issuers allowed on it; no separate cap for one).
	MaxBacklogItemsPerIssuer int64 `yaml:"max_backlog_items_per_issuer"`
	MaxBacklogBytesPerIssuer int64 `yaml:"max_backlog_bytes_per_issuer"`
	// Headers are injected upstream on every attempt; callers can neither
	// override nor remove them. Load canonicalises the names
	// (http.CanonicalHeaderKey); hop-by-hop headers (RFC 9110 §7.6.1) and
	// Host, Content-Length and Idempotency-Key are refused.
	Headers map[string]SecretRef `yaml:"headers"`
	// OAuth2, when set, makes the proxy authenticate to the upstream with
	// an OAuth 2.0 access token of the client credentials grant (RFC 6749
	// §4.4), sent as Authorization on every attempt; nil: no token.
	OAuth2 *OAuth2 `yaml:"oauth2"`
	// TLS, when set, configures mutual TLS (a client certificate) and a
	// private CA bundle for this https upstream; nil: system roots, no
	// client certificate.
	TLS *UpstreamTLS `yaml:"tls"`
	// StandardWebhooks, when set, signs every attempt with Standard
	// Webhooks signatures (webhook-id, webhook-timestamp,
	// webhook-signature); nil: no webhook signature.
	StandardWebhooks *StandardWebhooks `yaml:"standard_webhooks"`
	// AWSSigV4, when set, signs every attempt with AWS Signature Version 4
	// (Authorization, X-Amz-Date, X-Amz-Content-Sha256 and, with a session
	// token, X-Amz-Security-Token); nil: no AWS signature.
	AWSSigV4 *AWSSigV4 `yaml:"aws_sigv4"`
	// Redact names what is hidden on every way out (contract §7).
	Redact Redact `yaml:"redact"`
	// CompletionEvents says which endings of this endpoint's scheduled
	// callouts publish a Callout_Result__e platform event (contract §8):
	// "all", "dead_letters" or "none". "" (the default) is "all" for a
	// callout that carries a Callout-Source-Record, else "dead_letters":
	// an org's hourly event allocation is far below the proxy's rate.
	CompletionEvents string `yaml:"completion_events"`
}

// The values of Endpoint.CompletionEvents.
const (
	CompletionEventsAll         = "all"
	CompletionEventsDeadLetters = "dead_letters"
	CompletionEventsNone        = "none"
)

// Redact lists per-endpoint secrets to hide in status documents, logs,
// dead letters and Salesforce records, on top of the fixed list of contract §7
// (Authorization, Cookie, Set-Cookie, Proxy-Authorization).
type Redact struct {
	// Headers are header names (canonicalised by Load), request and response.
	Headers []string `yaml:"headers"`
	// Query are query parameter names, matched exactly.
	Query []string `yaml:"query"`
	// JSONFields are dot-separated paths into a JSON body, e.g. card.number.
	JSONFields []string `yaml:"json_fields"`
}

// Salesforce configures the Salesforce REST connection (JWT bearer flow).
type Salesforce struct {
	// LoginURL is the https URL tokens are minted at:
	// https://login.salesforce.com, https://test.salesforce.com or a My
	// Domain URL. No path, query or fragment. The JWT's `aud` is derived
	// from it as the Salesforce CLI does (sfapi.JWTAudience): a
	// sandbox host gives https://test.salesforce.com, anything else
	// https://login.salesforce.com.
	LoginURL string `yaml:"login_url"`
	// Audience, when set, replaces the derived `aud` of the JWT bearer
	// assertion: https://login.salesforce.com, https://test.salesforce.com
	// or an Experience Cloud site URL ("OAuth 2.0 JWT Bearer Flow for
	// Server-to-Server Integration"). An https URL without query or
	// fragment. Default: derived from LoginURL.
	Audience string `yaml:"audience"`
	// ClientIDEnv names the environment variable holding the connected
	// app's consumer key (the JWT's `iss`).
	ClientIDEnv string `yaml:"client_id_env"`
	// Username is the integration user (the JWT's `sub`), an email-shaped
	// Salesforce username.
	Username string `yaml:"username"`
	// PrivateKeyFile is the PEM private key (PRIVATE KEY or RSA PRIVATE KEY)
	// that signs the JWT bearer assertion.
	PrivateKeyFile string `yaml:"private_key_file"`
	// APIVersion is the REST API version, "NN.0". Default "68.0".
	APIVersion string `yaml:"api_version"`
	// OutboxInterval is how often every replica looks for due writes in
	// the Salesforce outbox (contract §7). Default 1s.
	OutboxInterval time.Duration `yaml:"outbox_interval"`
	// PollInterval is how often one replica asks Salesforce (SOQL) for the
	// Failed_Callout__c records an admin changed: Discarded ones make the
	// proxy delete its copy (contract §7). It shares one Composite call with
	// the reprocess poll, which runs every min(PollInterval,
	// ReprocessInterval). Default 1m.
	PollInterval time.Duration `yaml:"poll_interval"`
	// ReprocessInterval is how often one replica asks Salesforce (SOQL)
	// for the Failed_Callout__c records an admin set to Reprocess
	// Requested and replays them (contract §8 "Admins reprocess from
	// Salesforce"). Default 1m.
	ReprocessInterval time.Duration `yaml:"reprocess_interval"`
	// APIUsageSlowdown is the share of the org's daily API limit
	// (Sforce-Limit-Info api-usage=N/M) above which writes slow down to one
	// call per SlowdownInterval: 0 < x ≤ 1. Default 0.8.
	APIUsageSlowdown float64 `yaml:"api_usage_slowdown"`
	// SlowdownInterval is the least time between two Salesforce calls while
	// usage is above APIUsageSlowdown. Default 30s.
	SlowdownInterval time.Duration `yaml:"slowdown_interval"`
	// LimitPause is how long every replica pauses writes after Salesforce
	// answered REQUEST_LIMIT_EXCEEDED. Default 15m.
	LimitPause time.Duration `yaml:"limit_pause"`
	// RequestTimeout bounds one Salesforce HTTP call, the token call
	// included. Default 30s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// WebhookURL, when set, also receives every owner notification (contract
	// §6) as a JSON POST: an absolute http or https URL without user info.
	WebhookURL string `yaml:"webhook_url"`
	// BatchLinger is how long the first due write waits for others before
	// a batch that is not full is sent (contract §8: one API call carries many
	// records and events). Default 2s; at most 1m.
	BatchLinger time.Duration `yaml:"batch_linger"`
	// BatchMaxBytes bounds the JSON body of one Composite request, so that
	// a batch of records with full Long Text Areas is sent, and answered,
	// well within request_timeout and far below the REST API's 50 MB
	// limit on a text body ("Insert or Update Blob Data"). A record larger
	// than it is sent alone. Default 8 MiB (8388608); 65536 to 50000000.
	BatchMaxBytes int `yaml:"batch_max_bytes"`
	// FlushLease is how long a replica's hold on a batch in flight lasts —
	// the flush lease and its claimed outbox entries — without renewal: the
	// writer renews both every third of it while Salesforce answers, so a
	// replica that dies mid-batch holds up every write for at most this
	// long before a survivor takes over (docs/salesforce.md). Default 15s;
	// 1s to 5m.
	FlushLease time.Duration `yaml:"flush_lease"`
	// PubSub is the Salesforce Pub/Sub API endpoint (host:port, TLS) the
	// proxy subscribes at to the change events of Failed_Callout__c, so
	// that reprocess requests and discards arrive without polling (the
	// polls then run only while the subscription is down); "off" polls
	// only. Default api.pubsub.salesforce.com:7443 ("Pub/Sub API
	// Endpoint").
	PubSub string `yaml:"pubsub"`
}

// The values of endpoints.*.breaker.partition (contract §6).
const (
	// BreakerPartitionOrganisation, the default: each (endpoint,
	// organisation) pair has its own breaker, probe and counters, and the
	// endpoint's own breaker opens when two organisations' partitions are
	// open (docs/limits.md).
	BreakerPartitionOrganisation = "organisation"
	// BreakerPartitionEndpoint: one breaker for the endpoint, the opt-in
	// for a single-tenant upstream.
	BreakerPartitionEndpoint = "endpoint"
)

// EndpointBreaker is an endpoint's `breaker:` section.
type EndpointBreaker struct {
	// Partition is BreakerPartitionOrganisation (default, filled in by
	// Load) or BreakerPartitionEndpoint.
	Partition string `yaml:"partition"`
}

// Organisations is how many organisations (JWT issuers) may call e: its
// allowed_issuers, else every auth.issuers entry (contract §9). The fair
// shares of an endpoint (backlog, dispatch slots, breaker quorum:
// docs/limits.md) are sized by it.
func (c *Config) Organisations(e *Endpoint) int {
	if len(e.AllowedIssuers) > 0 {
		return len(e.AllowedIssuers)
	}
	return len(c.Auth.Issuers)
}

// PartitionedByOrganisation reports whether the endpoint's circuit breaker
// is partitioned by organisation (breaker.partition organisation, contract
// §6).
func (e *Endpoint) PartitionedByOrganisation() bool {
	return e.Breaker.Partition != BreakerPartitionEndpoint
}

// Rules are the endpoint's settings that the callout's life depends on
// (attempt limit, breaker, idempotency, backlog caps), for policy.Decide and
// the store. Valid after Load, which fills in inherited values.
func (e *Endpoint) Rules() policy.EndpointRules {
	return policy.EndpointRules{
		AttemptTimeout: e.AttemptTimeout, BreakerFailures: e.BreakerFailures,
		BreakerProbeInterval: e.BreakerProbeInterval, IdempotencyIgnored: e.Idempotency == IdempotencyIgnored,
		Backlog: policy.BacklogLimits{MaxItems: e.MaxBacklogItems, MaxBytes: e.MaxBacklogBytes,
			MaxItemsPerIssuer: e.MaxBacklogItemsPerIssuer, MaxBytesPerIssuer: e.MaxBacklogBytesPerIssuer},
	}
}
