package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Load reads the configuration file at path and does what Parse does, with
// two differences: every *Error carries File = path, and relative file paths
// in the configuration (certificate_files, hs256_secret_file, token_file,
// header `file:` refs, tls_cert_file, tls_key_file, private_key_file) are
// resolved against the directory of path, not the working directory, and
// stored resolved in the returned Config.
//
// getenv looks up environment variables (os.Getenv in production, a map in
// tests; nil means os.Getenv). Every error matches ErrInvalid.
func Load(path string, getenv func(string) string) (*Config, error) {
	cfg, err := load(path, getenv, true)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadPartial is Load that also returns what it decoded when the file has
// problems: the configuration with every key that has a problem at its
// default, and the problems (nil, err when the file cannot be read or is
// not YAML). Only for comparing with the configuration in force: a reload
// names the file's problems and the restart-only keys it changes in one
// rejection. Never put such a configuration in force.
func LoadPartial(path string, getenv func(string) string) (*Config, error) {
	return load(path, getenv, true)
}

// LoadForStore is Load for a command that only opens the store
// (`callout-proxy migrate`): the file is checked and validated exactly as
// Load does, but of the secrets and files it names only the redis
// section's (password_env, sentinel.password_env) must resolve; the
// proxy's runtime secrets (auth keys, admin tokens, endpoint headers,
// Salesforce credentials, TLS files) need not be present where the
// migration runs. Errors as Load's.
func LoadForStore(path string, getenv func(string) string) (*Config, error) {
	cfg, err := load(path, getenv, false)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

func load(path string, getenv func(string) string, all bool) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already the Error's File
		}
		return nil, &Error{File: path, Msg: "cannot read the configuration file: " + err.Error()}
	}
	return parse(data, getenv, path, filepath.Dir(path), all)
}

// Parse decodes a YAML configuration (contract §10) and returns it complete,
// or every problem found, joined with errors.Join, one *Error per line.
//
// Steps: the YAML is checked strictly (unknown keys, wrong kinds and
// durations that are not Go duration strings such as "5s" or "72h" are
// errors naming the key and its line); it is decoded onto Default(), so a key
// left out keeps its default (a partial policy block keeps the other policy
// defaults); then Prepare fills the derived values, validates, and checks
// every secret and file. Every problem is reported in one pass: a key of
// the wrong shape is left out of the decoding (its default stands in), and
// the later steps say nothing more of it, its children or its parents.
// Only a YAML syntax error (reported at the line where the text stops
// making sense) ends the pass, since there is no tree to check. Relative
// file paths are read from the working directory. A nil getenv means
// os.Getenv. Every error matches ErrInvalid.
func Parse(data []byte, getenv func(string) string) (*Config, error) {
	cfg, err := parse(data, getenv, "", "", true)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// Prepare completes a Config built in code or decoded by Parse: it fills the
// derived values and defaults (Auth.Algorithms, Endpoint.Name, Idempotency,
// BaseURL, Networks, canonical header names, inherited per-endpoint limits,
// Salesforce.APIVersion), validates every key, and checks that every secret
// resolves (through getenv; nil means os.Getenv) and every file it names can
// be read. It does not fill what Default() fills: start from Default().
// It returns every problem joined, each an *Error matching ErrInvalid.
func (c *Config) Prepare(getenv func(string) string) error {
	col := newCollector("")
	c.prepare(getenv, col, true)
	return col.err()
}

// prepare fills, validates and checks c; all false checks only the redis
// section's secrets (LoadForStore).
func (c *Config) prepare(getenv func(string) string, col *collector, all bool) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c.applyDefaults()
	c.validate(col)
	if all {
		c.checkResources(getenv, col)
	} else {
		c.checkRedisResources(getenv, col)
	}
}

func parse(data []byte, getenv func(string) string, file, baseDir string, all bool) (*Config, error) {
	col := newCollector(file)
	cfg := Default()
	body := parseYAML(data, col)
	if col.failed() {
		return nil, col.err()
	}
	if body != nil {
		// The shape check drops what it reports, so the rest decodes and
		// is validated in this same pass.
		body = col.walk(body, reflect.TypeFor[Config](), "")
		if err := yaml.NodeToValue(body, cfg, yaml.Strict()); err != nil {
			decodeError(err, col)
			return nil, col.err()
		}
	}
	col.decoded = true
	if baseDir != "" {
		cfg.resolvePaths(baseDir)
	}
	cfg.prepare(getenv, col, all)
	if col.failed() {
		return cfg, col.err() // LoadPartial's; Load and Parse drop it
	}
	cfg.Fingerprint = Fingerprint(data)
	return cfg, nil
}

// parseYAML parses data into one document's body; nil for an empty file.
func parseYAML(data []byte, col *collector) ast.Node {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		decodeError(err, col)
		return nil
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			col.at(line(doc.Body), "", "only one YAML document is allowed")
			return nil
		}
		body = doc.Body
	}
	if body != nil {
		if _, ok := mappingPairs(body); !ok {
			col.at(line(body), "", "the configuration must be a mapping of keys (listen, auth, endpoints, ...)")
			return nil
		}
	}
	return body
}

// decodeError records a YAML library error by its message and line only:
// the library's full rendering quotes the source around the line, which may
// hold something that should not be in a log.
func decodeError(err error, col *collector) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		l, msg := 0, ye.GetMessage()
		if tk := ye.GetToken(); tk != nil {
			l = tk.Position.Line
			// A key indented deeper than the keys beside it continues the
			// value before it, a plain scalar that may start lines above:
			// the problem is on the line of the key's colon.
			if next := tk.Next; next != nil && next.Value == ":" && next.Position.Line > l {
				msg += fmt.Sprintf(" (is this key indented deeper than the keys beside it? YAML read it "+
					"as part of the value that starts on line %d)", l)
				l = next.Position.Line
			}
		}
		col.at(l, "", "%s", msg)
		return
	}
	col.at(0, "", "%s", err.Error())
}

// resolvePaths makes every relative file path in c relative to base.
func (c *Config) resolvePaths(base string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	abs(&c.TLSCertFile)
	abs(&c.TLSKeyFile)
	for i := range c.Auth.CertificateFiles {
		abs(&c.Auth.CertificateFiles[i])
	}
	abs(&c.Auth.HS256SecretFile)
	for i := range c.Auth.IssuerKeys {
		k := &c.Auth.IssuerKeys[i]
		for j := range k.CertificateFiles {
			abs(&k.CertificateFiles[j])
		}
		abs(&k.HS256SecretFile)
	}
	for i := range c.Admin.Tokens {
		abs(&c.Admin.Tokens[i].TokenFile)
	}
	for _, e := range c.Endpoints {
		if e == nil {
			continue
		}
		for name, ref := range e.Headers {
			abs(&ref.File)
			e.Headers[name] = ref
		}
		e.resolveCredentialPaths(abs)
	}
	if c.Salesforce != nil {
		abs(&c.Salesforce.PrivateKeyFile)
	}
}
