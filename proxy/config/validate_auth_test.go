package config_test

import "testing"

// authWith returns an auth section: issuers and audience of the base, then
// rest (lines indented by two spaces).
func authWith(rest string) map[string]string {
	return map[string]string{"auth": "auth:\n  issuers: [https://example.my.salesforce.com]\n  audience: callout-proxy\n" + rest}
}

func TestValidateAuth(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"algorithm none", authWith("  algorithms: [none, HS256]\n  hs256_secret_env: JWT_SECRET\n"),
			[]string{`auth.algorithms[0]: "none" is not allowed (RS256, RS512, HS256)`}},
		{"algorithm in lower case", authWith("  algorithms: [hs256]\n  hs256_secret_env: JWT_SECRET\n"),
			[]string{`auth.algorithms[0]: "hs256" is not allowed`, "auth.hs256_secret_env: set, but auth.algorithms has no HS256"}},
		{"algorithm twice", authWith("  algorithms: [HS256, HS256]\n  hs256_secret_env: JWT_SECRET\n"),
			[]string{`auth.algorithms[1]: "HS256" is listed twice`}},
		{"RS256 without certificates", authWith("  algorithms: [RS256]\n"),
			[]string{"auth.algorithms: RS256 needs auth.certificate_files"}},
		{"RS512 without certificates", authWith("  algorithms: [HS256, RS512]\n  hs256_secret_env: JWT_SECRET\n"),
			[]string{"auth.algorithms: RS512 needs auth.certificate_files"}},
		{"HS256 without secret", authWith("  algorithms: [HS256]\n"),
			[]string{"auth.algorithms: HS256 needs auth.hs256_secret_env or hs256_secret_file"}},
		{"no algorithms and no certificates", authWith("  hs256_secret_env: JWT_SECRET\n"),
			[]string{"auth.algorithms: required: RS256 or RS512 with auth.certificate_files, HS256 with"}},
		{"certificates without RS algorithm", authWith("  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n  certificate_files: [{{dir}}/cert.pem]\n"),
			[]string{"auth.certificate_files: set, but auth.algorithms has no RS256 or RS512"}},
		{"secret without HS256", authWith("  certificate_files: [{{dir}}/cert.pem]\n  hs256_secret_env: JWT_SECRET\n"),
			[]string{"auth.hs256_secret_env: set, but auth.algorithms has no HS256"}},
		{"secret file without HS256", authWith("  certificate_files: [{{dir}}/cert.pem]\n  hs256_secret_file: {{dir}}/secret.txt\n"),
			[]string{"auth.hs256_secret_file: set, but auth.algorithms has no HS256"}},
		{"issuer_keys secret file without HS256", map[string]string{"auth": "auth:\n  issuers: [https://a.my.salesforce.com, https://b.my.salesforce.com]\n  audience: callout-proxy\n  algorithms: [RS256]\n" +
			"  issuer_keys:\n    - {issuer: https://a.my.salesforce.com, certificate_files: [{{dir}}/cert.pem]}\n    - {issuer: https://b.my.salesforce.com, hs256_secret_file: {{dir}}/secret.txt}\n"},
			[]string{"auth.issuer_keys[1].hs256_secret_file: set, but auth.algorithms has no HS256"}},
		{"unbound secret file", map[string]string{"auth": "auth:\n  issuers: [https://a.my.salesforce.com, https://b.my.salesforce.com]\n  audience: callout-proxy\n  algorithms: [HS256]\n  hs256_secret_file: {{dir}}/secret.txt\n" +
			"  issuer_keys:\n    - {issuer: https://a.my.salesforce.com, hs256_secret_env: JWT_SECRET}\n    - {issuer: https://b.my.salesforce.com, hs256_secret_env: JWT_SECRET}\n"},
			[]string{"auth.hs256_secret_file: secret.txt is not bound to an issuer: with several auth.issuers, list it under auth.issuer_keys with the issuer it signs for"}},
		{"secret env and file", authWith("  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n  hs256_secret_file: {{dir}}/secret.txt\n"),
			[]string{"auth.hs256_secret_file: set one of auth.hs256_secret_env and auth.hs256_secret_file, not both"}},
		{"no issuers", map[string]string{"auth": "auth:\n  audience: callout-proxy\n  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n"},
			[]string{"auth.issuers: at least one issuer is required"}},
		{"issuer twice and empty", map[string]string{"auth": "auth:\n  issuers: [https://a.my.salesforce.com, '', https://a.my.salesforce.com]\n  audience: callout-proxy\n  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n"},
			[]string{"auth.issuers[1]: must not be empty", `auth.issuers[2]: "https://a.my.salesforce.com" is listed twice`,
				"auth.hs256_secret_env: the HS256 secret in env JWT_SECRET is not bound to an issuer"}},
		{"several issuers and a top-level certificate", map[string]string{"auth": "auth:\n  issuers: [https://a.my.salesforce.com, https://b.my.salesforce.com]\n  audience: callout-proxy\n  certificate_files: [{{dir}}/cert.pem]\n"},
			[]string{"auth.certificate_files[0]: cert.pem is not bound to an issuer: with several auth.issuers, list it under auth.issuer_keys with the issuer it signs for"}},
		{"issuer_keys: unknown issuer and an issuer without key", map[string]string{"auth": "auth:\n  issuers: [https://a.my.salesforce.com, https://b.my.salesforce.com]\n  audience: callout-proxy\n  algorithms: [HS256]\n" +
			"  issuer_keys:\n    - {issuer: https://a.my.salesforce.com, hs256_secret_env: JWT_SECRET}\n    - {issuer: https://c.my.salesforce.com, hs256_secret_env: JWT_SECRET}\n    - {issuer: https://b.my.salesforce.com}\n"},
			[]string{`auth.issuer_keys[1].issuer: "https://c.my.salesforce.com" is not one of auth.issuers`,
				"auth.issuer_keys[2]: no key: set certificate_files, hs256_secret_env or hs256_secret_file",
				`auth.issuers[1]: "https://b.my.salesforce.com" has no key: bind its certificate or secret to it under auth.issuer_keys`}},
		{"no audience", map[string]string{"auth": "auth:\n  issuers: [https://a.my.salesforce.com]\n  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n"},
			[]string{"auth.audience: required"}},
		{"no auth block at all", map[string]string{"auth": ""},
			[]string{"auth.issuers: at least one issuer is required", "auth.audience: required", "auth.algorithms: required"}},
		{"negative durations", authWith("  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n  max_token_lifetime: -1m\n  leeway: -1s\n"),
			[]string{"auth.max_token_lifetime: must not be negative", "auth.leeway: must not be negative"}},
		{"negative token cache", authWith("  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n  token_cache_entries: -1\n"),
			[]string{"auth.token_cache_entries: must not be negative"}},
		{"leeway over lifetime", authWith("  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n  max_token_lifetime: 1m\n  leeway: 2m\n"),
			[]string{"auth.leeway: 2m0s must be shorter than auth.max_token_lifetime (1m0s)"}},
	})
}

func TestValidateAdmin(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"name missing", map[string]string{"admin": "admin:\n  tokens:\n    - {token_env: ADMIN_TOKEN, scope: write}\n"},
			[]string{"admin.tokens[0].name: required"}},
		{"name twice", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_env: ADMIN_TOKEN, scope: write}\n    - {name: ops, token_env: READER_TOKEN, scope: read}\n"},
			[]string{`admin.tokens[1].name: "ops" is used by an earlier token`}},
		{"scope unknown", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_env: ADMIN_TOKEN, scope: admin}\n"},
			[]string{`admin.tokens[0].scope: "admin" is not a scope; use read or write`}},
		{"scope missing", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_env: ADMIN_TOKEN}\n"},
			[]string{"admin.tokens[0].scope: required: read or write"}},
		{"env and file", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_env: ADMIN_TOKEN, token_file: {{dir}}/secret.txt, scope: write}\n"},
			[]string{"admin.tokens[0]: set exactly one of token_env and token_file"}},
		{"neither env nor file", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, scope: write}\n"},
			[]string{"admin.tokens[0]: set exactly one of token_env and token_file"}},
	})
}

// TestResources covers secrets and files that cannot be resolved or read:
// each problem names the key and the variable or file, never a value.
func TestResources(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"hs256 env unset", authWith("  algorithms: [HS256]\n  hs256_secret_env: MISSING_SECRET\n"),
			[]string{"auth.hs256_secret_env: environment variable MISSING_SECRET is not set or is empty"}},
		{"hs256 secret short", authWith("  algorithms: [HS256]\n  hs256_secret_env: SHORT\n"),
			[]string{"auth.hs256_secret_env: the secret in env SHORT is shorter than 32 bytes (RFC 7518 §3.2)"}},
		{"hs256 file missing", authWith("  algorithms: [HS256]\n  hs256_secret_file: {{dir}}/nope.txt\n"),
			[]string{"auth.hs256_secret_file: nope.txt: no such file or directory"}},
		{"hs256 env holding a secret", authWith("  algorithms: [HS256]\n  hs256_secret_env: '" + inlineSecret + " value'\n"),
			[]string{"auth.hs256_secret_env: the env value is not an environment variable name"}},
		{"certificate missing", authWith("  certificate_files: [{{dir}}/cert.pem, {{dir}}/gone.pem]\n"),
			[]string{"auth.certificate_files[1]: gone.pem: no such file or directory"}},
		{"certificate not PEM", authWith("  certificate_files: [{{dir}}/junk.txt]\n"),
			[]string{"auth.certificate_files[0]: junk.txt holds no CERTIFICATE or PUBLIC KEY or RSA PUBLIC KEY PEM block"}},
		{"tls pair", map[string]string{"extra": "tls_cert_file: {{dir}}/cert.pem\ntls_key_file: {{dir}}/junk.txt\n"},
			[]string{"tls_cert_file: cannot load it with tls_key_file"}},
		{"redis password unset", map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/0\n  password_env: NO_REDIS_PASSWORD\n"},
			[]string{"redis.password_env: environment variable NO_REDIS_PASSWORD is not set or is empty"}},
		{"admin token unset", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_env: NO_TOKEN, scope: write}\n"},
			[]string{"admin.tokens[0].token_env: environment variable NO_TOKEN is not set or is empty"}},
		{"admin token file missing", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_file: {{dir}}/none, scope: write}\n"},
			[]string{"admin.tokens[0].token_file: secret file: open "}},
		{"admin token short", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_env: SHORT, scope: write}\n"},
			[]string{"admin.tokens[0].token_env: the token in env SHORT is shorter than 16 bytes"}},
		{"admin tokens sharing a value", map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_env: ADMIN_TOKEN, scope: write}\n    - {name: reader, token_env: ADMIN_TOKEN, scope: read}\n"},
			[]string{`admin.tokens[1].token_env: token "reader" has the same value as admin.tokens[0] ("ops")`}},
		{"header env unset", endpoint("    url: https://api.example.com/\n    headers:\n      X-Key: {env: NO_KEY}\n"),
			[]string{"endpoints.payment-api.headers.X-Key: environment variable NO_KEY is not set or is empty"}},
		{"header file missing", endpoint("    url: https://api.example.com/\n    headers:\n      X-Key: {file: {{dir}}/no-key}\n"),
			[]string{"endpoints.payment-api.headers.X-Key: secret file: open "}},
		{"header value with a newline", endpoint("    url: https://api.example.com/\n    headers:\n      X-Key: {env: NEWLINE}\n"),
			[]string{"endpoints.payment-api.headers.X-Key: the value from env NEWLINE contains a control character"}},
		{"salesforce client id and key", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n  client_id_env: NO_CLIENT\n  username: a@example.com\n  private_key_file: {{dir}}/cert.pem\n"},
			[]string{"salesforce.client_id_env: environment variable NO_CLIENT is not set or is empty",
				"salesforce.private_key_file: cert.pem holds no PRIVATE KEY or RSA PRIVATE KEY PEM block"}},
	})
}
