// Package auth authenticates callers and admins (contract §9).
//
// Callers send a JWT as `Authorization: Bearer <jwt>` (RFC 6750 §2.1):
// Salesforce Named Credentials with the JWT protocol sign it RS256 or RS512
// with a certificate, send `kid`, and set nbf = iat; development set-ups may
// use HS256 with a shared secret. A Verifier checks the algorithm, the
// signature, `iss`, `aud`, `exp`/`nbf` with a leeway and the token's
// lifetime. Admins send named bearer tokens scoped read or write, checked by
// AdminTokens in constant time.
//
// Every failure is a *problem.Error (Unauthorized or Forbidden) whose detail
// says what was wrong and never contains the token or a secret.
package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// Algorithms the proxy can verify (contract §9). Anything else, `none`
// included, is refused at configuration time and at verification time.
const (
	RS256 = config.AlgRS256
	RS512 = config.AlgRS512
	HS256 = config.AlgHS256
)

// Caller is an authenticated caller: a Salesforce org (Issuer) and the
// token's subject (the running user, as the Named Credential puts it).
// Idempotency keys and callout ownership are scoped by Issuer (contract §5).
type Caller struct {
	// Issuer is the token's `iss`, one of auth.issuers.
	Issuer string
	// Subject is the token's `sub`; it may be empty.
	Subject string
	// IssuedAt is the token's `iat`, or its `nbf` when it has no `iat`.
	IssuedAt time.Time
	// ExpiresAt is the token's `exp`.
	ExpiresAt time.Time
}

// Verifier checks caller JWTs against config.Auth. It is safe for
// concurrent use. Its one mutable part is the cache of verified tokens
// (cache.go): the keys and settings are fixed for its life, so a rotation
// or a configuration reload is a new Verifier with an empty cache.
type Verifier struct {
	now         func() time.Time
	cache       *verified
	algorithms  []string
	keys        []rsaKey
	secrets     map[string][]jwt.VerificationKey // HS256 secrets ([]byte) by issuer
	issuers     []string
	audience    string
	maxLifetime time.Duration
	parser      *jwt.Parser
}

// NewVerifier builds a Verifier from cfg (contract §9, §10 `auth:`).
//
// It reads every file of cfg.CertificateFiles: PEM, one or more CERTIFICATE,
// PUBLIC KEY or RSA PUBLIC KEY blocks per file, RSA of at least MinRSABits.
// The HS256 secret comes from config.Auth.HS256Secret (getenv of
// cfg.HS256SecretEnv, or the file cfg.HS256SecretFile) and must be at least
// MinSecretBytes long and not a PEM block. As in config, a zero Leeway or
// MaxTokenLifetime means the default, config.DefaultLeeway (30s) or
// config.DefaultMaxTokenLifetime (1h). now is the clock used for exp, nbf
// and iat; nil means time.Now. cfg.TokenCacheEntries bounds the cache of
// verified tokens (0: DefaultTokenCacheEntries).
//
// It returns an error naming the config key when issuers, audience or
// algorithms are empty, an algorithm is not RS256, RS512 or HS256, an
// algorithm has no key material, key material is configured for no allowed
// algorithm, a duration or the cache size is negative, or a key file or secret is unusable.
func NewVerifier(cfg config.Auth, getenv func(string) string, now func() time.Time) (*Verifier, error) {
	if now == nil {
		now = time.Now
	}
	if cfg.TokenCacheEntries < 0 {
		return nil, fmt.Errorf("auth.token_cache_entries: %d is negative", cfg.TokenCacheEntries)
	}
	v := &Verifier{
		now: now, cache: newVerified(cfg.TokenCacheEntries),
		issuers: slices.Clone(cfg.Issuers), audience: cfg.Audience,
		maxLifetime: cfg.MaxTokenLifetime,
	}
	if err := v.checkClaimsConfig(cfg); err != nil {
		return nil, err
	}
	if err := v.loadKeyMaterial(cfg, getenv); err != nil {
		return nil, err
	}
	leeway := cfg.Leeway
	switch {
	case leeway < 0:
		return nil, fmt.Errorf("auth.leeway: %s is negative", leeway)
	case leeway == 0:
		leeway = config.DefaultLeeway
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(v.algorithms),
		jwt.WithTimeFunc(now),
		jwt.WithLeeway(leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithAudience(v.audience),
	)
	return v, nil
}

// checkClaimsConfig validates issuers, audience and max_token_lifetime.
func (v *Verifier) checkClaimsConfig(cfg config.Auth) error {
	if len(cfg.Issuers) == 0 {
		return errors.New("auth.issuers: at least one issuer is required")
	}
	for i, iss := range cfg.Issuers {
		if iss == "" {
			return fmt.Errorf("auth.issuers[%d]: empty issuer", i)
		}
	}
	if cfg.Audience == "" {
		return errors.New("auth.audience: required")
	}
	switch {
	case v.maxLifetime < 0:
		return fmt.Errorf("auth.max_token_lifetime: %s is negative", v.maxLifetime)
	case v.maxLifetime == 0:
		v.maxLifetime = config.DefaultMaxTokenLifetime
	}
	return nil
}

// loadKeyMaterial validates algorithms and loads the RSA keys and the HS256
// secret each of them needs.
func (v *Verifier) loadKeyMaterial(cfg config.Auth, getenv func(string) string) error {
	if len(cfg.Algorithms) == 0 {
		return errors.New("auth.algorithms: at least one of RS256, RS512, HS256 is required")
	}
	var rsa, hs bool
	for i, alg := range cfg.Algorithms {
		switch alg {
		case RS256, RS512:
			rsa = true
		case HS256:
			hs = true
		default:
			return fmt.Errorf("auth.algorithms[%d]: %q is not one of RS256, RS512, HS256", i, alg)
		}
		if !slices.Contains(v.algorithms, alg) {
			v.algorithms = append(v.algorithms, alg)
		}
	}
	if err := checkBound(cfg); err != nil {
		return err
	}
	var certs, secrets bool
	v.secrets = map[string][]jwt.VerificationKey{}
	for _, b := range cfg.Bindings() {
		ref := b.HS256Ref()
		hasSecret := ref.Env != "" || ref.File != ""
		switch {
		case !rsa && len(b.CertificateFiles) > 0:
			return fmt.Errorf("%s.certificate_files: set, but auth.algorithms has no RS256/RS512", b.Path())
		case !hs && hasSecret:
			return fmt.Errorf("%s.hs256_secret_env/hs256_secret_file: set, but auth.algorithms has no HS256", b.Path())
		}
		keys, err := loadRSAKeys(b.Path(), b.Issuer, b.CertificateFiles)
		if err != nil {
			return err
		}
		v.keys = append(v.keys, keys...)
		certs = certs || len(keys) > 0
		if hasSecret {
			secret, err := loadHS256Secret(b, getenv)
			if err != nil {
				return err
			}
			v.secrets[b.Issuer] = append(v.secrets[b.Issuer], secret)
			secrets = true
		}
	}
	switch {
	case rsa && !certs:
		return errors.New("auth.certificate_files: required for RS256/RS512")
	case hs && !secrets:
		return errors.New("auth.hs256_secret_env or auth.hs256_secret_file: required for HS256")
	}
	return nil
}

// checkBound refuses key material bound to no allowed issuer (contract §9):
// top-level keys when auth.issuers has several entries, and an
// auth.issuer_keys entry whose issuer is not one of auth.issuers. The error
// names the configuration key.
func checkBound(cfg config.Auth) error {
	if len(cfg.Issuers) > 1 && (len(cfg.CertificateFiles) > 0 || cfg.HS256SecretEnv != "" || cfg.HS256SecretFile != "") {
		return errors.New("auth.certificate_files/hs256_secret_env: not bound to an issuer; with several auth.issuers list each key under auth.issuer_keys")
	}
	for _, b := range cfg.Bindings() {
		if !slices.Contains(cfg.Issuers, b.Issuer) {
			return fmt.Errorf("%s.issuer: %q is not one of auth.issuers", b.Path(), b.Issuer)
		}
	}
	return nil
}

// Keys describes the configured RSA verification keys, in configuration
// order, for the start-up log (for instance a warning on an expired
// certificate).
func (v *Verifier) Keys() []KeyInfo {
	out := make([]KeyInfo, len(v.keys))
	for i, k := range v.keys {
		out[i] = k.info
		out[i].Labels = slices.Clone(k.info.Labels)
	}
	return out
}

// Verify authenticates an Authorization header value, `Bearer <jwt>`
// (contract §9), and returns the caller.
//
// Checks, in order: the Bearer scheme (RFC 6750 §2.1); the compact JWS form;
// `alg` among auth.algorithms (`none` never); no `crit` header (RFC 7515
// §4.1.11: the proxy understands no JWS extension); the signature — RS256/RS512
// against the configured RSA keys, HS256 against the secret, each algorithm
// only with its own key type, so a token HMAC-signed with a public key's PEM
// bytes fails; `exp` present and not past (RFC 7519 §4.1.4), `nbf` and `iat`
// not in the future, each with the leeway; `aud` containing auth.audience
// (§4.1.3); `iss` exactly one of auth.issuers (§4.1.1); `iat` or `nbf`
// present and exp − max(iat, nbf) at most auth.max_token_lifetime.
//
// Keys are bound to issuers (config.Auth.Bindings): the signature is checked
// only against the keys bound to the token's own `iss`, so an organisation
// holding one issuer's key cannot mint a token another issuer's callouts,
// breaker partitions or shares would accept; a token whose `iss` has no key
// of its algorithm's type is refused like a bad signature.
//
// Key rotation: when the token has a `kid` header, the keys of its issuer
// labelled with it (see KeyInfo.Labels) are tried first, then the issuer's
// other keys; a signature valid under any of them passes. Salesforce names
// its certificate in `kid`, a name the certificate file itself need not
// carry, so `kid` only orders the search and never narrows it, and a kid
// matching no label costs at most one RSA verification per key of the
// issuer.
//
// A token that passed is remembered by its SHA-256 until its exp (cache.go):
// the same token again skips the parse and the signature
// check, which depend on nothing but the token and this Verifier. Checks
// that depend on the request (AllowedOn, the endpoint's allowed_issuers)
// are not part of Verify and run on every request. A token that failed is
// not remembered.
//
// Every error is a *problem.Error with Code problem.Unauthorized and a detail
// naming what was wrong with the token — never the token, a secret, nor
// what the proxy is configured to accept (its algorithms, audience or
// number of keys), which a caller probing for them would learn otherwise.
func (v *Verifier) Verify(authorization string) (Caller, error) {
	raw, err := bearerToken(authorization)
	if err != nil {
		return Caller{}, err
	}
	now := v.now()
	digest := sha256.Sum256([]byte(raw))
	if c, ok := v.cache.get(digest, now); ok {
		return c, nil
	}
	var claims jwt.RegisteredClaims
	tok, err := v.parser.ParseWithClaims(raw, &claims, v.keyFor)
	if err != nil {
		return Caller{}, v.reject(tok, &claims, err)
	}
	c, err := v.checkClaims(&claims)
	if err == nil {
		v.cache.put(digest, c, now)
	}
	return c, err
}

// keyFor is the jwt.Keyfunc. It hands out key material by the type of the
// signing method, never by the token's say-so alone: RSA keys only to
// *jwt.SigningMethodRSA, the HMAC secret only to HS256. The parser has
// already refused algorithms outside auth.algorithms; keyFor checks again.
//
// A token with a `crit` header is refused before any signature is
// checked: crit names JWS extensions the verifier must understand, and
// this one understands none (RFC 7515 §4.1.11; golang-jwt ignores crit).
func (v *Verifier) keyFor(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errCrit
	}
	alg := t.Method.Alg()
	if !slices.Contains(v.algorithms, alg) {
		return nil, fmt.Errorf("algorithm %s not allowed", alg)
	}
	var iss string
	if c, ok := t.Claims.(*jwt.RegisteredClaims); ok {
		iss = c.Issuer
	}
	if !slices.Contains(v.issuers, iss) {
		return nil, errIssuer
	}
	var keys []jwt.VerificationKey
	switch t.Method.(type) {
	case *jwt.SigningMethodRSA:
		kid, _ := t.Header["kid"].(string)
		keys = v.rsaKeysFor(iss, kid)
	case *jwt.SigningMethodHMAC:
		if alg == HS256 {
			keys = v.secrets[iss]
		}
	default:
		return nil, fmt.Errorf("signing method %T not supported", t.Method)
	}
	if len(keys) == 0 {
		return nil, errNoKey
	}
	return jwt.VerificationKeySet{Keys: keys}, nil
}

// Errors of keyFor that reject names (reject.go).
var (
	// errIssuer: the token's iss is absent or not one of auth.issuers, so
	// no key is bound to it.
	errIssuer = errors.New("issuer not allowed")
	// errNoKey: the token's issuer has no key of the token's algorithm.
	errNoKey = errors.New("issuer has no key of this algorithm")
)

// rsaKeysFor returns the RSA keys bound to issuer iss, those labelled kid
// first.
func (v *Verifier) rsaKeysFor(iss, kid string) []jwt.VerificationKey {
	keys := make([]jwt.VerificationKey, 0, len(v.keys))
	for pass := range 2 {
		for _, k := range v.keys {
			if k.issuer == iss && (kid != "" && k.matches(kid)) == (pass == 0) {
				keys = append(keys, k.pub)
			}
		}
	}
	return keys
}

// checkClaims applies the checks the jwt parser does not: issuer allow-list
// and maximum lifetime. It returns the Caller when both pass.
func (v *Verifier) checkClaims(c *jwt.RegisteredClaims) (Caller, error) {
	switch {
	case c.ExpiresAt == nil: // the parser requires exp; kept for safety
		return Caller{}, unauthorized("token has no exp claim")
	case c.Issuer == "":
		return Caller{}, unauthorized("token has no iss claim")
	case !slices.Contains(v.issuers, c.Issuer):
		return Caller{}, unauthorized(fmt.Sprintf("issuer %s is not allowed", quote(c.Issuer)))
	}
	var start time.Time
	if c.IssuedAt != nil {
		start = c.IssuedAt.Time
	}
	if c.NotBefore != nil && c.NotBefore.After(start) {
		start = c.NotBefore.Time
	}
	if start.IsZero() {
		return Caller{}, unauthorized("token has neither iat nor nbf claim; its lifetime cannot be checked")
	}
	if life := c.ExpiresAt.Sub(start); life > v.maxLifetime {
		return Caller{}, unauthorized(fmt.Sprintf(
			"token lifetime %s (exp − max(iat, nbf)) exceeds max_token_lifetime %s", life, v.maxLifetime))
	}
	caller := Caller{Issuer: c.Issuer, Subject: c.Subject, ExpiresAt: c.ExpiresAt.Time}
	if c.IssuedAt != nil {
		caller.IssuedAt = c.IssuedAt.Time
	} else {
		caller.IssuedAt = c.NotBefore.Time
	}
	return caller, nil
}

// AllowedOn reports whether c may call ep: always when ep.AllowedIssuers is
// empty, otherwise only when c.Issuer is in it (contract §9, endpoint
// `allowed_issuers`). It returns a *problem.Error with Code problem.Forbidden
// naming the issuer and endpoint, or Code problem.Internal when ep is nil.
func (v *Verifier) AllowedOn(c Caller, ep *config.Endpoint) error {
	if ep == nil {
		return problem.Errorf(problem.Internal, "no endpoint to check the caller against")
	}
	if len(ep.AllowedIssuers) == 0 || slices.Contains(ep.AllowedIssuers, c.Issuer) {
		return nil
	}
	return problem.Errorf(problem.Forbidden,
		fmt.Sprintf("issuer %s is not allowed on endpoint %q", quote(c.Issuer), ep.Name))
}
