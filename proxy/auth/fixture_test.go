package auth_test

import (
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

const (
	issuer    = "https://example.my.salesforce.com"
	sandbox   = "https://example--uat.sandbox.my.salesforce.com"
	audience  = "callout-proxy"
	subject   = "integration@example.com"
	secretEnv = "CALLOUT_PROXY_JWT_SECRET"
	// secret is 40 bytes: over auth.MinSecretBytes.
	secret = "0123456789abcdef0123456789abcdef-secret"
	// sandboxSecretEnv holds sandboxSecret, a second issuer's own secret.
	sandboxSecretEnv = "CALLOUT_PROXY_SANDBOX_JWT_SECRET"
	sandboxSecret    = "fedcba9876543210fedcba9876543210-sandbox"
	// currentKID is the unique name of the first certificate, written as
	// its CN and file name.
	currentKID = "sf_jwt_2026"
)

// fixture is a test world: a fixed clock, three RSA keys in three files
// (key1 in the named certificate currentKID.crt, key2 in a second,
// rotated certificate, key3 as a bare PUBLIC KEY), an unconfigured key,
// and the HS256 secret.
type fixture struct {
	now                   time.Time
	dir                   string
	key1, key2, key3, bad *rsa.PrivateKey
	certFile, rotatedFile string
	pubKeyFile            string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := newHSFixture(t)
	f.key1, f.key2 = authtest.NewRSAKey(t), authtest.NewRSAKey(t)
	f.key3, f.bad = authtest.NewRSAKey(t), authtest.NewRSAKey(t)
	f.certFile = authtest.WriteNamedCertificate(t, f.dir, currentKID, f.key1)
	f.rotatedFile = authtest.WriteCertificate(t, f.dir, f.key2)
	f.pubKeyFile = authtest.WritePublicKey(t, f.dir, f.key3)
	return f
}

// newHSFixture is a fixture without RSA keys, for HS256-only tests.
func newHSFixture(t *testing.T) *fixture {
	return &fixture{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), dir: t.TempDir()}
}

// clock is the injected time source.
func (f *fixture) clock() time.Time { return f.now }

// authConfig is an auth: section with the given algorithms and the key
// material each needs, bound to both issuers alike (one auth.issuer_keys
// entry each).
func (f *fixture) authConfig(algs ...string) config.Auth {
	cfg := config.Auth{Issuers: []string{issuer, sandbox}, Audience: audience, Algorithms: algs}
	var keys config.IssuerKeys
	for _, a := range algs {
		switch a {
		case auth.RS256, auth.RS512:
			keys.CertificateFiles = []string{f.certFile, f.rotatedFile, f.pubKeyFile}
		case auth.HS256:
			keys.HS256SecretEnv = secretEnv
		}
	}
	for _, iss := range cfg.Issuers {
		keys.Issuer = iss
		cfg.IssuerKeys = append(cfg.IssuerKeys, keys)
	}
	return cfg
}

// singleConfig is an auth: section of the one issuer, whose top-level key
// material (as authConfig's) is implicitly bound to it.
func (f *fixture) singleConfig(algs ...string) config.Auth {
	cfg := f.authConfig(algs...)
	k := cfg.IssuerKeys[0]
	cfg.Issuers, cfg.IssuerKeys = []string{issuer}, nil
	cfg.CertificateFiles, cfg.HS256SecretEnv = k.CertificateFiles, k.HS256SecretEnv
	return cfg
}

// verifier builds a Verifier from cfg or fails the test.
func (f *fixture) verifier(t *testing.T, cfg config.Auth) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(cfg, env, f.clock)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// claims are Salesforce-shaped claims issued at now+offset for lifetime.
func (f *fixture) claims(offset, lifetime time.Duration) jwt.RegisteredClaims {
	return authtest.Claims(issuer, audience, subject, f.now.Add(offset), lifetime)
}

// readFile returns a file's bytes or fails the test.
func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes b to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// env is the injected environment.
func env(name string) string {
	switch name {
	case secretEnv:
		return secret
	case sandboxSecretEnv:
		return sandboxSecret
	}
	return ""
}

// unsigned crafts a token by hand: base64url(header).base64url(claims).sig.
func unsigned(header, claims, sig string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims)) + "." + sig
}

// wantProblem asserts err is a *problem.Error with code whose detail holds
// want; it returns the problem.
func wantProblem(t *testing.T, err error, code problem.Code, want string) *problem.Error {
	t.Helper()
	var pe *problem.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v (%T), want *problem.Error", err, err)
	}
	if pe.Code != code {
		t.Errorf("code = %q, want %q (detail %q)", pe.Code, code, pe.Detail)
	}
	if !strings.Contains(pe.Detail, want) {
		t.Errorf("detail = %q, want it to contain %q", pe.Detail, want)
	}
	return pe
}
