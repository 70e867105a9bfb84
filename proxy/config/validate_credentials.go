package config

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"os"
	"slices"
	"strings"
)

// validateCredentials checks an endpoint's oauth2 and tls blocks (no I/O;
// checkCredentialResources reads the files).
func validateCredentials(col *collector, key string, e *Endpoint) {
	if e.OAuth2 != nil {
		validateOAuth2(col, key, e)
	}
	if e.TLS != nil {
		validateUpstreamTLS(col, key+".tls", e)
	}
}

// validateOAuth2 checks the client credentials settings and fills the
// default auth_style.
func validateOAuth2(col *collector, key string, e *Endpoint) {
	o := e.OAuth2
	k := key + ".oauth2"
	validateTokenURL(col, k+".token_url", o.TokenURL)
	for _, ref := range []struct {
		name string
		ref  SecretRef
	}{{"client_id", o.ClientID}, {"client_secret", o.ClientSecret}} {
		if (ref.ref.Env == "") == (ref.ref.File == "") {
			col.add(k+"."+ref.name, "required: set exactly one of env and file")
		}
	}
	for i, s := range o.Scopes {
		if !isScopeToken(s) {
			col.add(index(k+".scopes", i), "is not a scope token (RFC 6749 §3.3: printable ASCII without space, '\"' or '\\')")
		}
	}
	for _, p := range sortedKeys(o.Params) {
		switch {
		case p == "":
			col.add(k+".params", "parameter names must not be empty")
		case slices.Contains(reservedOAuth2Params, p):
			col.add(join(k+".params", p), "cannot be set here; use token_url, scopes, audience, client_id or client_secret")
		}
	}
	switch o.AuthStyle {
	case "":
		o.AuthStyle = AuthStyleHeader
	case AuthStyleHeader, AuthStyleParams:
	default:
		col.add(k+".auth_style", "%q must be header or params", o.AuthStyle)
	}
	if _, ok := e.Headers["Authorization"]; ok {
		col.add(key+".headers.Authorization", "conflicts with oauth2, which sends the access token as Authorization")
	}
}

// validateTokenURL accepts an absolute https URL with a host and no user
// info or fragment. The URL is not quoted back.
func validateTokenURL(col *collector, key, raw string) {
	if raw == "" {
		col.add(key, "required: the authorization server's token endpoint, e.g. https://auth.example.com/oauth2/token")
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		col.add(key, "is not a URL")
	case u.Scheme != "https":
		col.add(key, "must be an https URL (RFC 6749 §3.2: the token endpoint requires TLS)")
	case u.Hostname() == "" || u.Opaque != "":
		col.add(key, "must be an absolute URL with a host")
	case u.User != nil:
		col.add(key, "must not contain user info; set client_id and client_secret")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		col.add(key, "must not have a fragment")
	case u.Port() != "" && !validPort(u.Port()):
		col.add(key, "port must be 1-65535")
	}
}

// isScopeToken reports an RFC 6749 §3.3 scope-token: 1*( %x21 / %x23-5B /
// %x5D-7E ).
func isScopeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// validateUpstreamTLS checks that the certificate and key come as a pair,
// that the block sets something, and that the upstream is https.
func validateUpstreamTLS(col *collector, key string, e *Endpoint) {
	t := e.TLS
	switch {
	case t.ClientCertFile != "" && t.ClientKeyFile == "":
		col.add(key+".client_key_file", "required when client_cert_file is set")
	case t.ClientCertFile == "" && t.ClientKeyFile != "":
		col.add(key+".client_cert_file", "required when client_key_file is set")
	case t.ClientCertFile == "" && t.CAFile == "":
		col.add(key, "set client_cert_file and client_key_file, ca_file, or both")
	}
	if e.BaseURL != nil && e.BaseURL.Scheme != "https" {
		col.add(key, "applies to https upstreams only; the endpoint's url is http")
	}
}

// checkCredentialResources reads every credential file of endpoint e
// (under key endpoints.<name>) and resolves its OAuth2 client id and
// secret, so a missing one is reported at start. Values are never quoted.
func checkCredentialResources(col *collector, key string, e *Endpoint, getenv func(string) string) {
	if o := e.OAuth2; o != nil {
		k := key + ".oauth2"
		checkSecretValue(col, k+".client_id", o.ClientID, getenv)
		checkSecretValue(col, k+".client_secret", o.ClientSecret, getenv)
		if o.CAFile != "" {
			checkCABundle(col, k+".ca_file", o.CAFile)
		}
	}
	if t := e.TLS; t != nil {
		if t.ClientCertFile != "" && t.ClientKeyFile != "" {
			if _, err := tls.LoadX509KeyPair(t.ClientCertFile, t.ClientKeyFile); err != nil {
				col.add(key+".tls.client_cert_file", "cannot load it with client_key_file: %v", err)
			}
		}
		if t.CAFile != "" {
			checkCABundle(col, key+".tls.ca_file", t.CAFile)
		}
	}
}

// checkCABundle requires path to hold at least one PEM CERTIFICATE that
// parses.
func checkCABundle(col *collector, key, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		col.add(key, "%v", err)
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		col.add(key, "%s holds no PEM CERTIFICATE that parses", path)
	}
}
