package config

import (
	"maps"
	"slices"
)

// OAuth2 client authentication styles of OAuth2.AuthStyle (RFC 6749 §2.3.1).
const (
	// AuthStyleHeader sends client_id and client_secret as HTTP Basic
	// authentication, which every authorization server must support
	// (RFC 6749 §2.3.1). The default.
	AuthStyleHeader = "header"
	// AuthStyleParams sends them as client_id and client_secret form
	// parameters in the token request body, for servers that want that.
	AuthStyleParams = "params"
)

// OAuth2 configures the client credentials grant (RFC 6749 §4.4) the proxy
// uses to obtain the access token it sends upstream as `Authorization:
// <token_type> <access_token>` (RFC 6750 §2.1). Tokens are cached and
// fetched again before they expire; the proxy's forwarder owns that.
type OAuth2 struct {
	// TokenURL is the authorization server's token endpoint: an absolute
	// https URL (RFC 6749 §3.2 requires TLS) without user info or fragment.
	// Its port is the one the token request may dial; the endpoint's
	// allowed_networks apply to it too.
	TokenURL string `yaml:"token_url"`
	// ClientID is where the client identifier is: {env: VAR} or {file: PATH}.
	ClientID SecretRef `yaml:"client_id"`
	// ClientSecret is where the client secret is: {env: VAR} or
	// {file: PATH}. A file is re-read when it changes (a Kubernetes Secret
	// update), so a rotation needs no restart.
	ClientSecret SecretRef `yaml:"client_secret"`
	// Scopes are requested as the space-separated `scope` parameter
	// (RFC 6749 §3.3); each a scope-token (printable ASCII, no space, `"`
	// or `\`). Empty: no scope parameter.
	Scopes []string `yaml:"scopes"`
	// Audience, when set, is sent as the `audience` parameter (Auth0,
	// Okta and RFC 8693 use it to pick the API the token is for).
	Audience string `yaml:"audience"`
	// Params are extra form parameters of the token request, e.g.
	// {resource: https://api.example.com} (RFC 8707). They may not set
	// grant_type, scope, audience, client_id or client_secret, which have
	// keys of their own.
	Params map[string]string `yaml:"params"`
	// AuthStyle is how the client authenticates to the token endpoint:
	// AuthStyleHeader (HTTP Basic, the default) or AuthStyleParams.
	AuthStyle string `yaml:"auth_style"`
	// CAFile is an optional PEM bundle of the CA certificates that sign the
	// token endpoint's certificate (a private CA); empty: system roots. It
	// is re-read when it changes.
	CAFile string `yaml:"ca_file"`
}

// UpstreamTLS configures the TLS client side of an https upstream: a client
// certificate for mutual TLS (RFC 8446 §4.4.2) and a private CA bundle.
// Every file is re-read when it changes (a Kubernetes Secret update) and
// the next attempt uses the new value.
type UpstreamTLS struct {
	// ClientCertFile is a PEM certificate chain presented to the upstream,
	// leaf first; set with ClientKeyFile or not at all.
	ClientCertFile string `yaml:"client_cert_file"`
	// ClientKeyFile is the PEM private key of ClientCertFile.
	ClientKeyFile string `yaml:"client_key_file"`
	// CAFile is a PEM bundle of the CA certificates trusted for the
	// upstream's certificate instead of the system roots (a private CA).
	CAFile string `yaml:"ca_file"`
}

// reservedOAuth2Params are token request parameters OAuth2.Params may not
// set: the grant itself (RFC 6749 §4.4.2), and those with a key of their
// own.
var reservedOAuth2Params = []string{"grant_type", "scope", "audience", "client_id", "client_secret"}

// clone returns a copy of o that shares no slice or map with it; nil for nil.
func (o *OAuth2) clone() *OAuth2 {
	if o == nil {
		return nil
	}
	n := *o
	n.Scopes = slices.Clone(o.Scopes)
	n.Params = maps.Clone(o.Params)
	return &n
}

// resolveCredentialPaths makes the credential file paths of e relative to
// base (see Config.resolvePaths).
func (e *Endpoint) resolveCredentialPaths(abs func(*string)) {
	if o := e.OAuth2; o != nil {
		abs(&o.ClientID.File)
		abs(&o.ClientSecret.File)
		abs(&o.CAFile)
	}
	if t := e.TLS; t != nil {
		abs(&t.ClientCertFile)
		abs(&t.ClientKeyFile)
		abs(&t.CAFile)
	}
	if w := e.StandardWebhooks; w != nil {
		for i := range w.Secrets {
			abs(&w.Secrets[i].File)
		}
	}
	if a := e.AWSSigV4; a != nil {
		abs(&a.AccessKeyID.File)
		abs(&a.SecretAccessKey.File)
		abs(&a.SessionToken.File)
	}
}
