package credentials

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// secret is one configured secret value: an environment variable, read on
// every use (the environment of a running process does not change, but the
// injected getenv of a test may), or a watched file.
type secret struct {
	key    string
	ref    config.SecretRef
	getenv func(string) string
	file   *watched[string]
}

// newSecret returns the secret ref points at; key names it in errors.
func newSecret(key string, ref config.SecretRef, o *Options) *secret {
	s := &secret{key: key, ref: ref, getenv: o.Getenv}
	if ref.File != "" && ref.Env == "" {
		s.file = newWatched(o, key, []string{ref.File}, maxSecretBytes, parseSecret(ref.File))
	}
	return s
}

// value returns the secret's current value. Errors (*ConfigError) name the
// key and the variable or file, never the value: a variable unset or
// empty, a file never readable, a value with a control character.
func (s *secret) value() (string, error) {
	if s.file != nil {
		v, _, err := s.file.get()
		if err != nil {
			return "", &ConfigError{Err: err}
		}
		return v, nil
	}
	v, err := s.ref.Resolve(s.getenv)
	switch {
	case err != nil:
		return "", &ConfigError{Err: fmt.Errorf("%s: %w", s.key, err)}
	case strings.ContainsFunc(v, isControl):
		return "", &ConfigError{Err: fmt.Errorf("%s: the value from %s contains a control character", s.key, s.ref)}
	}
	return v, nil
}

// newWatched returns a watched value on o's clock, interval and logger.
func newWatched[T any](o *Options, key string, paths []string, max int64, parse func([][]byte) (T, error)) *watched[T] {
	return &watched[T]{key: key, paths: paths, maxBytes: max, parse: parse,
		now: o.Now, interval: o.RecheckInterval, logger: o.Logger}
}

// parseKeyPair is the parse function of a client certificate and key
// (tls.X509KeyPair: PEM certificate chain, leaf first, and its key).
func parseKeyPair(data [][]byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(data[0], data[1])
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// parseCAs is the parse function of a CA bundle: at least one PEM
// CERTIFICATE that parses.
func parseCAs(data [][]byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data[0]) {
		return nil, errors.New("no PEM CERTIFICATE that parses")
	}
	return p, nil
}

// TLS is an endpoint's TLS client material at one moment.
type TLS struct {
	// Certificate is the client certificate to present (mutual TLS); nil
	// when the endpoint has none.
	Certificate *tls.Certificate
	// RootCAs replaces the base roots when set (a private CA bundle).
	RootCAs *x509.CertPool
	// ID changes whenever Certificate or RootCAs do (a rotation); "" when
	// the endpoint configures neither. A transport built for one ID must
	// not be used for another.
	ID string
}

// tlsFiles watches an endpoint's client certificate pair and CA bundle.
type tlsFiles struct {
	pair *watched[*tls.Certificate] // nil: no client certificate
	ca   *watched[*x509.CertPool]   // nil: base roots
}

func newTLSFiles(key string, t *config.UpstreamTLS, o *Options) *tlsFiles {
	f := &tlsFiles{}
	if t.ClientCertFile != "" && t.ClientKeyFile != "" {
		f.pair = newWatched(o, key+".client_cert_file", []string{t.ClientCertFile, t.ClientKeyFile},
			maxPEMBytes, parseKeyPair)
	}
	if t.CAFile != "" {
		f.ca = newWatched(o, key+".ca_file", []string{t.CAFile}, maxPEMBytes, parseCAs)
	}
	return f
}

// get returns the current material. Errors are *ConfigError: a file never
// loaded.
func (f *tlsFiles) get() (TLS, error) {
	var m TLS
	var cg, rg uint64
	var err error
	if f.pair != nil {
		if m.Certificate, cg, err = f.pair.get(); err != nil {
			return TLS{}, &ConfigError{Err: err}
		}
	}
	if f.ca != nil {
		if m.RootCAs, rg, err = f.ca.get(); err != nil {
			return TLS{}, &ConfigError{Err: err}
		}
	}
	m.ID = "cert " + strconv.FormatUint(cg, 10) + " roots " + strconv.FormatUint(rg, 10)
	return m, nil
}
