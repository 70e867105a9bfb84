package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
)

// Secret values the tests put in the environment and in files. None of them
// may ever appear in an error string.
const (
	jwtSecret     = "jwt-secret-value-0123456789abcdef-XYZ"
	adminSecret   = "admin-token-value-0123456789"
	readerSecret  = "reader-token-value-0123456789"
	paymentSecret = "Bearer payment-secret-value-42"
	fileSecret    = "file-secret-value-0123456789abcdef"
	redisPassword = "hunter2-redis-password"
	urlPassword   = "hunter3-url-password"
	inlineSecret  = "sk_live_inline_secret_value"
)

// allSecrets lists every secret value a test may hand to the package.
var allSecrets = []string{jwtSecret, adminSecret, readerSecret, paymentSecret, fileSecret,
	redisPassword, urlPassword, inlineSecret}

type env map[string]string

func (e env) get(k string) string { return e[k] }

func baseEnv() env {
	return env{
		"JWT_SECRET":     jwtSecret,
		"ADMIN_TOKEN":    adminSecret,
		"READER_TOKEN":   readerSecret,
		"PAYMENT_AUTH":   paymentSecret,
		"REDIS_PASSWORD": redisPassword,
		"SF_CLIENT_ID":   "3MVG9-consumer-key",
		"HOOK_SECRET":    whsec,
		"SHORT":          "too-short",
		"NEWLINE":        "value\n\n",
	}
}

// sectionOrder is the order doc writes sections in; "extra" is free text.
var sectionOrder = []string{"listen", "redis", "auth", "admin", "policy", "endpoints", "salesforce", "extra"}

// baseSections is a valid configuration, split in top-level sections.
func baseSections() map[string]string {
	return map[string]string{
		"listen": "listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18081\n",
		"auth": `auth:
  issuers: [https://example.my.salesforce.com, https://example--uat.sandbox.my.salesforce.com]
  audience: callout-proxy
  algorithms: [HS256]
  issuer_keys: [{issuer: https://example.my.salesforce.com, hs256_secret_env: JWT_SECRET}, {issuer: https://example--uat.sandbox.my.salesforce.com, hs256_secret_env: JWT_SECRET}]
`,
		"admin": `admin:
  tokens:
    - {name: ops, token_env: ADMIN_TOKEN, scope: write}
`,
		"endpoints": `endpoints:
  payment-api:
    url: https://api.example.com/v2
    headers:
      Authorization: {env: PAYMENT_AUTH}
`,
	}
}

// doc assembles a configuration from the base sections with over applied:
// a section in over replaces the base one, "" drops it. {{dir}} in the text
// becomes dir.
func doc(over map[string]string, dir string) string {
	s := baseSections()
	for k, v := range over {
		s[k] = v
	}
	var b strings.Builder
	for _, k := range sectionOrder {
		b.WriteString(s[k])
	}
	return strings.ReplaceAll(b.String(), "{{dir}}", dir)
}

// keyFiles writes, into a new temporary directory, a self-signed
// certificate (cert.pem), its PKCS #8 key (key.pem, also usable as a
// Salesforce JWT key), a file secret (secret.txt) and a file that is not
// PEM (junk.txt), and returns the directory.
func keyFiles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cert, key := credtest.SelfSigned(t, "callout-proxy test", "localhost")
	credtest.WriteFile(t, dir, "cert.pem", cert)
	credtest.WriteFile(t, dir, "key.pem", key)
	credtest.WriteFile(t, dir, "secret.txt", []byte(fileSecret+"\n"))
	credtest.WriteFile(t, dir, "junk.txt", []byte("not a pem file\n"))
	return dir
}

// problems returns each joined error of err, asserting that every one is a
// *config.Error matching ErrInvalid and that none contains a secret value.
func problems(t *testing.T, err error) []*config.Error {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got nil")
	}
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	assertNoSecret(t, err.Error())
	var out []*config.Error
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	for _, e := range list {
		var ce *config.Error
		if !errors.As(e, &ce) {
			t.Errorf("%T %q is not a *config.Error", e, e)
			continue
		}
		out = append(out, ce)
	}
	return out
}

func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, secret := range allSecrets {
		if strings.Contains(s, secret) {
			t.Errorf("secret value %q leaked into %q", secret, s)
		}
	}
}

func mustParse(t *testing.T, yaml string, getenv func(string) string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), getenv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

// check is one parsed value and the value it must have.
type check struct {
	name      string
	got, want any
}

// checkAll runs each check as a subtest: got must deep-equal want.
func checkAll(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("got  %+v\nwant %+v", c.got, c.want)
			}
		})
	}
}
