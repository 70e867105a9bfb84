package config

import (
	"crypto/tls"
	"encoding/pem"
	"os"
	"slices"
	"strings"
)

// Minimum secret sizes, in bytes. proxy/auth enforces the same numbers
// (auth.MinSecretBytes, auth.MinAdminTokenBytes); checking them here too
// reports them with every other problem at start.
const (
	// MinHS256SecretBytes: an HS256 key must be at least as long as the
	// hash output, 256 bits (RFC 7518 §3.2).
	MinHS256SecretBytes = 32
	// MinAdminTokenBytes: an admin bearer token must be at least this long.
	MinAdminTokenBytes = 16
)

// checkResources resolves every secret and reads every file the
// configuration names, so a missing variable or file is reported at start
// with its key. Refs that validate already found malformed are skipped.
// Errors name variables and paths, never values.
func (c *Config) checkResources(getenv func(string) string, col *collector) {
	c.checkAuthResources(getenv, col)
	if c.TLSCertFile != "" && c.TLSKeyFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			col.add("tls_cert_file", "cannot load it with tls_key_file: %v", err)
		}
	}
	c.checkRedisResources(getenv, col)
	c.checkAdminTokens(getenv, col)
	for _, name := range c.EndpointNames() {
		e := c.Endpoints[name]
		if e == nil {
			continue
		}
		for _, h := range sortedKeys(e.Headers) {
			checkSecretValue(col, join(join("endpoints", name), "headers."+h), e.Headers[h], getenv)
		}
		checkCredentialResources(col, join("endpoints", name), e, getenv)
		checkSigningResources(col, join("endpoints", name), e, getenv)
	}
	if sf := c.Salesforce; sf != nil {
		if sf.ClientIDEnv != "" {
			if _, err := resolveEnv(sf.ClientIDEnv, getenv); err != nil {
				col.add("salesforce.client_id_env", "%v", err)
			}
		}
		if sf.PrivateKeyFile != "" {
			checkPEM(col, "salesforce.private_key_file", sf.PrivateKeyFile, "PRIVATE KEY", "RSA PRIVATE KEY")
		}
	}
}

// checkSecretValue resolves ref, the secret under key, and reports a
// variable or file it cannot read, or a value holding a control character.
// A ref validate already found malformed (neither or both of env and file)
// is skipped. The value is never quoted.
func checkSecretValue(col *collector, key string, ref SecretRef, getenv func(string) string) {
	if (ref.Env == "") == (ref.File == "") {
		return
	}
	v, err := ref.Resolve(getenv)
	switch {
	case err != nil:
		col.add(key, "%v", err)
	case strings.ContainsFunc(v, isControl):
		col.add(key, "the value from %s contains a control character (a stray newline?)", ref)
	}
}

// checkRedisResources resolves the redis section's secrets.
func (c *Config) checkRedisResources(getenv func(string) string, col *collector) {
	if c.Redis.PasswordEnv != "" {
		if _, err := resolveEnv(c.Redis.PasswordEnv, getenv); err != nil {
			col.add("redis.password_env", "%v", err)
		}
	}
	if s := c.Redis.Sentinel; s != nil && s.PasswordEnv != "" {
		if _, err := resolveEnv(s.PasswordEnv, getenv); err != nil {
			col.add("redis.sentinel.password_env", "%v", err)
		}
	}
}

func (c *Config) checkAuthResources(getenv func(string) string, col *collector) {
	for _, k := range c.Auth.Bindings() {
		for i, f := range k.CertificateFiles {
			checkPEM(col, index(join(k.path, "certificate_files"), i), f, "CERTIFICATE", "PUBLIC KEY", "RSA PUBLIC KEY")
		}
		ref := k.HS256Ref()
		if (ref.Env == "") == (ref.File == "") {
			continue
		}
		key := k.secretKey(k.path)
		v, err := ref.Resolve(getenv)
		switch {
		case err != nil:
			col.add(key, "%v", err)
		case len(v) < MinHS256SecretBytes:
			col.add(key, "the secret in %s is shorter than %d bytes (RFC 7518 §3.2)", ref, MinHS256SecretBytes)
		}
	}
}

// checkAdminTokens resolves each well-formed token and refuses short ones
// and ones sharing a value (which would make the token's name, and so the
// audit log, ambiguous).
func (c *Config) checkAdminTokens(getenv func(string) string, col *collector) {
	values := make([]string, len(c.Admin.Tokens))
	for i, t := range c.Admin.Tokens {
		ref := t.Ref()
		if (ref.Env == "") == (ref.File == "") {
			continue
		}
		key := index("admin.tokens", i) + ".token_env"
		if ref.File != "" {
			key = index("admin.tokens", i) + ".token_file"
		}
		v, err := ref.Resolve(getenv)
		switch {
		case err != nil:
			col.add(key, "%v", err)
			continue
		case len(v) < MinAdminTokenBytes:
			col.add(key, "the token in %s is shorter than %d bytes", ref, MinAdminTokenBytes)
		}
		if j := slices.Index(values, v); j >= 0 {
			col.add(key, "token %q has the same value as admin.tokens[%d] (%q)", t.Name, j, c.Admin.Tokens[j].Name)
		}
		values[i] = v
	}
}

// checkPEM reads path and requires a PEM block of one of types. Nothing of
// the file's content is ever quoted.
func checkPEM(col *collector, key, path string, types ...string) {
	data, err := os.ReadFile(path)
	if err != nil {
		col.add(key, "%v", err)
		return
	}
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if slices.Contains(types, block.Type) {
			return
		}
	}
	col.add(key, "%s holds no %s PEM block", path, strings.Join(types, " or "))
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
