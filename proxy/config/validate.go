package config

import (
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// apiVersionRE is the shape of a Salesforce REST API version ("68.0").
var apiVersionRE = regexp.MustCompile(`^[1-9][0-9]*\.0$`)

// validate checks every key of an already defaulted Config and records each
// problem under its key path. It does no I/O (checkResources does).
func (c *Config) validate(col *collector) {
	validateListen(col, "listen", c.Listen)
	validateListen(col, "admin_listen", c.AdminListen)
	if c.Listen != "" && c.Listen == c.AdminListen && !strings.HasSuffix(c.Listen, ":0") {
		col.add("admin_listen", "must differ from listen (%s)", c.Listen)
	}
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		col.add("tls_key_file", "required when tls_cert_file is set")
	case c.TLSCertFile == "" && c.TLSKeyFile != "":
		col.add("tls_cert_file", "required when tls_key_file is set")
	}
	c.Redis.validate(col)
	c.Auth.validate(col)
	c.Admin.validate(col)
	c.Log.validate(col)
	validatePolicy(col, c.Policy)
	c.Limits.validate(col, c.Policy.MaxRequestBytes, c.Policy.MaxResponseBytes)
	c.validateEndpoints(col)
	c.Tracing.validate(col)
	if c.Salesforce != nil {
		c.Salesforce.validate(col)
	}
}

// validateListen accepts host:port with a numeric port 0–65535; the host
// may be empty (all interfaces).
func validateListen(col *collector, key, addr string) {
	if addr == "" {
		col.add(key, "required: a host:port such as 127.0.0.1:8080 or :8080")
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		col.add(key, "%q is not a host:port such as 127.0.0.1:8080 or :8080", addr)
	}
}

// validate checks the Redis location. The URL is never quoted back: it may
// carry a password.
func (r Redis) validate(col *collector) {
	set := 0
	for _, given := range []bool{r.URL != "", len(r.Cluster) > 0, r.Sentinel != nil} {
		if given {
			set++
		}
	}
	if set > 1 {
		col.add("redis", "set one of url, cluster and sentinel, not several")
	}
	if r.URL != "" {
		validateRedisURL(col, r)
	}
	for i, seed := range r.Cluster {
		if !hostPort(seed) {
			col.add(index("redis.cluster", i), "%q is not host:port", seed)
		}
	}
	if g := r.GateStaleness; g != 0 && (g < MinGateStaleness || g > MaxGateStaleness) {
		col.add("redis.gate_staleness", "%s is outside %s to %s", g, MinGateStaleness, MaxGateStaleness)
	}
	if r.Sentinel != nil {
		r.Sentinel.validate(col)
	}
	r.validateDurability(col)
}

// validate checks the Sentinel block: a master name and host:port addresses.
func (s Sentinel) validate(col *collector) {
	if s.MasterName == "" {
		col.add("redis.sentinel.master_name", "is required (the name the Sentinels monitor the primary under)")
	}
	if len(s.Addresses) == 0 {
		col.add("redis.sentinel.addresses", "needs at least one Sentinel host:port")
	}
	seen := map[string]int{}
	for i, a := range s.Addresses {
		if !hostPort(a) {
			col.add(index("redis.sentinel.addresses", i), "%q is not host:port", a)
		}
		if j, dup := seen[a]; dup {
			col.add(index("redis.sentinel.addresses", i), "%q is listed twice (also at %d): each Sentinel once, "+
				"or a quorum seems larger than it is", a, j)
		}
		seen[a] = i
	}
}

// validateDurability checks redis.durability and its timeout (contract
// §11). replicated and fsync need a store with replicas to wait for, or an
// append-only file: not the embedded one (docs/operating.md "Durability").
// A timeout with local, which waits for nothing, is a mistake of the file
// (applyDefaults fills it only for the other levels).
func (r Redis) validateDurability(col *collector) {
	switch r.Durability {
	case "", DurabilityLocal:
		if r.DurabilityTimeout != 0 {
			col.add("redis.durability_timeout", "is set, but redis.durability is %s, which waits for nothing; "+
				"remove it, or set durability %s or %s", DurabilityLocal, DurabilityReplicated, DurabilityFsync)
		}
		return
	case DurabilityReplicated, DurabilityFsync:
	default:
		col.add("redis.durability", "must be %s, %s or %s, not %q", DurabilityLocal, DurabilityReplicated,
			DurabilityFsync, r.Durability)
		return
	}
	if r.Embedded() {
		col.add("redis.durability", "%s needs a Redis (url, sentinel or cluster); the embedded store keeps nothing", r.Durability)
	}
	if t := r.DurabilityTimeout; t != 0 && (t < MinDurabilityTimeout || t > MaxDurabilityTimeout) {
		col.add("redis.durability_timeout", "%s is outside %s to %s", t, MinDurabilityTimeout, MaxDurabilityTimeout)
	}
}

// hostPort reports whether s is host:port with a non-empty host and a port
// 1–65535.
func hostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return err == nil && p != 0
}

func validateRedisURL(col *collector, r Redis) {
	u, err := url.Parse(r.URL)
	switch {
	case err != nil:
		col.add("redis.url", "is not a URL (redis://host:6379/0)")
		return
	case u.Scheme != "redis" && u.Scheme != "rediss":
		col.add("redis.url", "scheme must be redis or rediss, not %q", u.Scheme)
	case u.Hostname() == "":
		col.add("redis.url", "has no host (redis://host:6379/0)")
	case u.Fragment != "":
		col.add("redis.url", "must not have a fragment")
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if _, err := strconv.ParseUint(db, 10, 16); err != nil {
			col.add("redis.url", "path must be a database number such as /0")
		}
	}
	if _, hasPassword := u.User.Password(); hasPassword && r.PasswordEnv != "" {
		col.add("redis.password_env", "set, but redis.url carries a password too; keep one")
	}
}

// validate checks caller authentication (contract §9): issuers, audience,
// algorithms and their key material, lifetime and leeway.
func (a Auth) validate(col *collector) {
	if len(a.Issuers) == 0 {
		col.add("auth.issuers", "at least one issuer is required")
	}
	for i, iss := range a.Issuers {
		switch {
		case iss == "":
			col.add(index("auth.issuers", i), "must not be empty")
		case slices.Index(a.Issuers, iss) < i:
			col.add(index("auth.issuers", i), "%q is listed twice", iss)
		}
	}
	if a.Audience == "" {
		col.add("auth.audience", "required")
	}
	a.validateAlgorithms(col)
	if a.MaxTokenLifetime < 0 {
		col.add("auth.max_token_lifetime", "must not be negative")
	}
	if a.TokenCacheEntries < 0 {
		col.add("auth.token_cache_entries", "must not be negative")
	}
	switch {
	case a.Leeway < 0:
		col.add("auth.leeway", "must not be negative")
	case a.MaxTokenLifetime > 0 && a.Leeway >= a.MaxTokenLifetime:
		col.add("auth.leeway", "%s must be shorter than auth.max_token_lifetime (%s)", a.Leeway, a.MaxTokenLifetime)
	}
}

func (a Auth) validateAlgorithms(col *collector) {
	if len(a.Algorithms) == 0 {
		col.add("auth.algorithms", "required: RS256 or RS512 with auth.certificate_files, HS256 with auth.hs256_secret_env or hs256_secret_file")
		return
	}
	var rsa string
	var hs bool
	for i, alg := range a.Algorithms {
		switch {
		case alg != AlgRS256 && alg != AlgRS512 && alg != AlgHS256:
			col.add(index("auth.algorithms", i), "%q is not allowed (RS256, RS512, HS256)", alg)
		case slices.Index(a.Algorithms, alg) < i:
			col.add(index("auth.algorithms", i), "%q is listed twice", alg)
		case alg == AlgHS256:
			hs = true
		case rsa == "":
			rsa = alg
		}
	}
	hasSecret := a.hasSecret()
	switch {
	case rsa != "" && !a.hasCertificates():
		col.add("auth.algorithms", "%s needs auth.certificate_files", rsa)
	case rsa == "" && a.hasCertificates():
		col.add("auth.certificate_files", "set, but auth.algorithms has no RS256 or RS512")
	}
	switch {
	case hs && !hasSecret:
		col.add("auth.algorithms", "HS256 needs auth.hs256_secret_env or hs256_secret_file")
	case !hs && hasSecret:
		col.add(a.firstSecretKey(), "set, but auth.algorithms has no HS256")
	}
	a.validateBindings(col)
}

// hasCertificates reports whether any certificate file is configured, top
// level or under auth.issuer_keys.
func (a Auth) hasCertificates() bool {
	return len(a.CertificateFiles) > 0 || slices.ContainsFunc(a.IssuerKeys, func(k IssuerKeys) bool { return len(k.CertificateFiles) > 0 })
}

// firstSecretKey is the configuration key of the first HS256 secret
// configured, top level first, then auth.issuer_keys in order (the one an
// error about "a secret is set" names).
func (a Auth) firstSecretKey() string {
	if top := (IssuerKeys{HS256SecretEnv: a.HS256SecretEnv, HS256SecretFile: a.HS256SecretFile}); top.hasKeys() {
		return top.secretKey("auth")
	}
	for i, k := range a.IssuerKeys {
		if k.HS256SecretEnv != "" || k.HS256SecretFile != "" {
			return k.secretKey(index("auth.issuer_keys", i))
		}
	}
	return "auth.hs256_secret_env"
}

// hasSecret reports whether any HS256 secret is configured, top level or
// under auth.issuer_keys.
func (a Auth) hasSecret() bool {
	has := func(k IssuerKeys) bool { return k.HS256SecretEnv != "" || k.HS256SecretFile != "" }
	return has(IssuerKeys{HS256SecretEnv: a.HS256SecretEnv, HS256SecretFile: a.HS256SecretFile}) || slices.ContainsFunc(a.IssuerKeys, has)
}

// validateBindings checks that every key is bound to the issuer it may
// sign for (contract §9): with several auth.issuers the top-level keys are
// bound to none and refused, each auth.issuer_keys entry names one of
// auth.issuers and has key material, and every issuer has a key.
func (a Auth) validateBindings(col *collector) {
	if len(a.Issuers) > 1 {
		const why = "is not bound to an issuer: with several auth.issuers, list it under auth.issuer_keys with the issuer it signs for"
		for i, f := range a.CertificateFiles {
			col.add(index("auth.certificate_files", i), "%s %s", f, why)
		}
		if top := (IssuerKeys{HS256SecretEnv: a.HS256SecretEnv, HS256SecretFile: a.HS256SecretFile}); top.hasKeys() {
			col.add(top.secretKey("auth"), "the HS256 secret in %s %s", top.HS256Ref(), why)
		}
	}
	bindings := a.Bindings()
	for _, k := range bindings {
		switch {
		case k.path == "auth":
		case k.Issuer == "":
			col.add(k.path+".issuer", "required: the auth.issuers entry these keys sign for")
		case !slices.Contains(a.Issuers, k.Issuer):
			col.add(k.path+".issuer", "%q is not one of auth.issuers", k.Issuer)
		case !k.hasKeys():
			col.add(k.path, "no key: set certificate_files, hs256_secret_env or hs256_secret_file")
		}
		if k.HS256SecretEnv != "" && k.HS256SecretFile != "" {
			col.add(join(k.path, "hs256_secret_file"), "set one of %s and %s, not both", join(k.path, "hs256_secret_env"), join(k.path, "hs256_secret_file"))
		}
	}
	if len(a.Issuers) < 2 || len(a.CertificateFiles) > 0 || a.HS256SecretEnv != "" || a.HS256SecretFile != "" {
		return // one issuer: the algorithms' checks cover a missing key; unbound keys reported above
	}
	for i, iss := range a.Issuers {
		if iss != "" && !slices.ContainsFunc(bindings, func(k IssuerKeys) bool { return k.Issuer == iss && k.hasKeys() }) {
			col.add(index("auth.issuers", i), "%q has no key: bind its certificate or secret to it under auth.issuer_keys", iss)
		}
	}
}

// validate checks the admin tokens' names, scopes and secret references.
func (a Admin) validate(col *collector) {
	for i, t := range a.Tokens {
		key := index("admin.tokens", i)
		switch {
		case t.Name == "":
			col.add(key+".name", "required")
		case slices.IndexFunc(a.Tokens, func(o AdminToken) bool { return o.Name == t.Name }) < i:
			col.add(key+".name", "%q is used by an earlier token; names must be unique", t.Name)
		}
		switch t.Scope {
		case ScopeRead, ScopeWrite:
		case "":
			col.add(key+".scope", "required: read or write")
		default:
			col.add(key+".scope", "%q is not a scope; use read or write", t.Scope)
		}
		if (t.TokenEnv == "") == (t.TokenFile == "") {
			col.add(key, "set exactly one of token_env and token_file")
		}
	}
	if a.Pprof && !slices.ContainsFunc(a.Tokens, func(t AdminToken) bool { return t.Scope == ScopeWrite }) {
		col.add("admin.pprof", "true, but no admin token has scope write: the profiler would be unreachable")
	}
}

// validatePolicy reports policy.Validate's problems under their keys, and
// per-attempt limits that exceed the attempt timeout.
func validatePolicy(col *collector, p policy.Policy) {
	var fe *policy.FieldError
	for _, err := range unjoin(p.Validate()) {
		if errors.As(err, &fe) {
			col.add(fe.Key, "%s", fe.Problem)
		} else {
			col.add("policy", "%s", err.Error())
		}
	}
	checkLimits(col, "policy", p.ConnectTimeout, p.HeaderTimeout, p.AttemptTimeout)
}

// checkLimits reports a connect or header timeout longer than the attempt
// timeout that contains it (contract §3: the attempt limit covers the whole
// attempt). Non-positive values are reported elsewhere.
func checkLimits(col *collector, prefix string, connect, header, attempt time.Duration) {
	if attempt <= 0 {
		return
	}
	if connect > attempt {
		col.add(prefix+".connect_timeout", "%s exceeds the attempt_timeout in force (%s)", connect, attempt)
	}
	if header > attempt {
		col.add(prefix+".header_timeout", "%s exceeds the attempt_timeout in force (%s)", header, attempt)
	}
}

// unjoin returns the errors joined in err (errors.Join), or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// validate checks the Salesforce connection settings.
func (s *Salesforce) validate(col *collector) {
	u, err := url.Parse(s.LoginURL)
	switch {
	case s.LoginURL == "":
		col.add("salesforce.login_url", "required, e.g. https://login.salesforce.com")
	case err != nil || u.Scheme != "https" || u.Hostname() == "":
		col.add("salesforce.login_url", "must be an https URL such as https://login.salesforce.com")
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Trim(u.Path, "/") != "":
		col.add("salesforce.login_url", "must be scheme and host only, e.g. https://login.salesforce.com")
	}
	if s.Audience != "" {
		a, err := url.Parse(s.Audience)
		if err != nil || a.Scheme != "https" || a.Hostname() == "" || a.User != nil || a.RawQuery != "" ||
			a.ForceQuery || a.Fragment != "" {
			col.add("salesforce.audience", "must be an https URL such as https://test.salesforce.com "+
				"(or an Experience Cloud site URL), without query or fragment")
		}
	}
	if s.ClientIDEnv == "" {
		col.add("salesforce.client_id_env", "required: the environment variable holding the connected app's consumer key")
	}
	switch {
	case s.Username == "":
		col.add("salesforce.username", "required")
	case !strings.Contains(s.Username, "@"):
		col.add("salesforce.username", "must be a Salesforce username, which has the form of an email address")
	}
	if s.PrivateKeyFile == "" {
		col.add("salesforce.private_key_file", "required: the PEM key that signs the JWT bearer assertion")
	}
	if !apiVersionRE.MatchString(s.APIVersion) {
		col.add("salesforce.api_version", "%q is not an API version such as \"68.0\"", s.APIVersion)
	}
	s.validateOutbox(col)
}

// validateOutbox checks the outbox settings of the salesforce block.
func (s *Salesforce) validateOutbox(col *collector) {
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"outbox_interval", s.OutboxInterval}, {"poll_interval", s.PollInterval},
		{"reprocess_interval", s.ReprocessInterval},
		{"slowdown_interval", s.SlowdownInterval}, {"limit_pause", s.LimitPause},
		{"request_timeout", s.RequestTimeout}, {"batch_linger", s.BatchLinger},
	} {
		if d.v < 0 {
			col.add("salesforce."+d.key, "must not be negative")
		}
	}
	if s.BatchLinger > MaxBatchLinger {
		col.add("salesforce.batch_linger", "must be at most %s: writes wait that long for company", MaxBatchLinger)
	}
	if s.FlushLease < MinFlushLease || s.FlushLease > MaxFlushLease {
		col.add("salesforce.flush_lease", "must be %s to %s: a dead writer holds every write up that long",
			MinFlushLease, MaxFlushLease)
	}
	if s.BatchMaxBytes < MinBatchMaxBytes || s.BatchMaxBytes > MaxBatchMaxBytesCap {
		col.add("salesforce.batch_max_bytes", "must be %d to %d bytes", MinBatchMaxBytes, MaxBatchMaxBytesCap)
	}
	if _, port, err := net.SplitHostPort(s.PubSub); s.PubSub != PubSubOff && (err != nil || port == "") {
		col.add("salesforce.pubsub", "must be host:port (default %s) or %q", DefaultPubSub, PubSubOff)
	}
	if !(s.APIUsageSlowdown > 0 && s.APIUsageSlowdown <= 1) {
		col.add("salesforce.api_usage_slowdown", "must be a share of the daily limit: more than 0, at most 1")
	}
	if s.WebhookURL == "" {
		return
	}
	u, err := url.Parse(s.WebhookURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		col.add("salesforce.webhook_url", "must be an absolute http or https URL without user info")
	}
}
