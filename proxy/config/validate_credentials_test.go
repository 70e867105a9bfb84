package config_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
)

// oauth2Block is a valid oauth2 block (indented for endpoint()) whose
// secrets come from baseEnv and {{dir}}/secret.txt.
const oauth2Block = `    oauth2:
      token_url: https://auth.example.com/oauth2/token
      client_id: {env: SF_CLIENT_ID}
      client_secret: {file: {{dir}}/secret.txt}
`

// oauth2TokenURL is oauth2Block with token_url u.
func oauth2TokenURL(u string) string {
	return strings.Replace(oauth2Block, "https://auth.example.com/oauth2/token", u, 1)
}

// TestParseCredentials: a complete oauth2 and tls block decodes into the
// endpoint, auth_style defaults to header, and Load resolves relative
// credential paths against the configuration's directory.
func TestParseCredentials(t *testing.T) {
	dir := keyFiles(t)
	text := doc(map[string]string{"endpoints": `endpoints:
  a:
    url: https://a.example.com
    oauth2:
      token_url: https://auth.example.com/token?tenant=7
      client_id: {env: SF_CLIENT_ID}
      client_secret: {file: secret.txt}
      scopes: [payments.write, "urn:example:read"]
      audience: https://api.example.com
      params: {resource: https://api.example.com/, tenant: 42}
      ca_file: cert.pem
    tls:
      client_cert_file: cert.pem
      client_key_file: key.pem
      ca_file: cert.pem
`}, dir)
	cfg, err := config.Load(credtest.WriteFile(t, dir, "config.yaml", []byte(text)), baseEnv().get)
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Endpoints["a"]
	cert := filepath.Join(dir, "cert.pem")
	checkAll(t, []check{
		{"oauth2", *e.OAuth2, config.OAuth2{
			TokenURL: "https://auth.example.com/token?tenant=7", ClientID: config.SecretRef{Env: "SF_CLIENT_ID"},
			ClientSecret: config.SecretRef{File: filepath.Join(dir, "secret.txt")},
			Scopes:       []string{"payments.write", "urn:example:read"}, Audience: "https://api.example.com",
			Params:    map[string]string{"resource": "https://api.example.com/", "tenant": "42"},
			AuthStyle: config.AuthStyleHeader, CAFile: cert,
		}},
		{"tls", *e.TLS, config.UpstreamTLS{ClientCertFile: cert, ClientKeyFile: filepath.Join(dir, "key.pem"), CAFile: cert}},
	})
}

// TestParseCredentialsAlias: an endpoint copied with a YAML alias gets its
// own oauth2 and tls blocks, not a shared pointer.
func TestParseCredentialsAlias(t *testing.T) {
	dir := keyFiles(t)
	cfg := mustParse(t, doc(map[string]string{"endpoints": "endpoints:\n  a: &a\n    url: https://a.example.com\n" +
		oauth2Block + "    tls: {ca_file: {{dir}}/cert.pem}\n  b: *a\n"}, dir), baseEnv().get)
	a, b := cfg.Endpoints["a"], cfg.Endpoints["b"]
	if a.OAuth2 == b.OAuth2 || a.TLS == b.TLS || !reflect.DeepEqual(a.OAuth2, b.OAuth2) {
		t.Errorf("alias shares or loses credentials: a %p %p, b %p %p", a.OAuth2, a.TLS, b.OAuth2, b.TLS)
	}
}

func TestValidateOAuth2(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"empty block", endpoint(url + "    oauth2: {}\n"), []string{
			"endpoints.payment-api.oauth2.token_url: required",
			"endpoints.payment-api.oauth2.client_id: required: set exactly one of env and file",
			"endpoints.payment-api.oauth2.client_secret: required: set exactly one of env and file"}},
		{"http token url", endpoint(url + oauth2TokenURL("http://auth.example.com/token")),
			[]string{"endpoints.payment-api.oauth2.token_url: must be an https URL"}},
		{"token url with user info", endpoint(url + oauth2TokenURL("https://id:pw@auth.example.com/token")),
			[]string{"endpoints.payment-api.oauth2.token_url: must not contain user info"}},
		{"token url with a fragment", endpoint(url + oauth2TokenURL("https://auth.example.com/token#x")),
			[]string{"endpoints.payment-api.oauth2.token_url: must not have a fragment"}},
		{"both env and file", endpoint(url + "    oauth2:\n      token_url: https://auth.example.com/token\n" +
			"      client_id: {env: SF_CLIENT_ID, file: x}\n      client_secret: {env: PAYMENT_AUTH}\n"),
			[]string{"endpoints.payment-api.oauth2.client_id: required: set exactly one of env and file"}},
		{"bad scope and params", endpoint(url + oauth2Block +
			"      scopes: [ok, \"two words\"]\n      params: {grant_type: password, scope: x, resource: r}\n      auth_style: basic\n"),
			[]string{"endpoints.payment-api.oauth2.scopes[1]: is not a scope token",
				"endpoints.payment-api.oauth2.params.grant_type: cannot be set here",
				"endpoints.payment-api.oauth2.params.scope: cannot be set here",
				`endpoints.payment-api.oauth2.auth_style: "basic" must be header or params`}},
		{"authorization header too", endpoint(url + "    headers:\n      authorization: {env: PAYMENT_AUTH}\n" + oauth2Block),
			[]string{"endpoints.payment-api.headers.Authorization: conflicts with oauth2"}},
		{"client secret unset", endpoint(url + "    oauth2:\n      token_url: https://auth.example.com/token\n" +
			"      client_id: {env: SF_CLIENT_ID}\n      client_secret: {env: NO_SECRET}\n"),
			[]string{"endpoints.payment-api.oauth2.client_secret: environment variable NO_SECRET is not set or is empty"}},
		{"client id with a newline and secret file missing", endpoint(url + "    oauth2:\n      token_url: https://auth.example.com/token\n" +
			"      client_id: {env: NEWLINE}\n      client_secret: {file: {{dir}}/none}\n"),
			[]string{"endpoints.payment-api.oauth2.client_id: the value from env NEWLINE contains a control character",
				"endpoints.payment-api.oauth2.client_secret: secret file: open "}},
		{"token ca not pem", endpoint(url + oauth2Block + "      ca_file: {{dir}}/junk.txt\n"),
			[]string{"endpoints.payment-api.oauth2.ca_file: holds no PEM CERTIFICATE"}},
	})
}

func TestValidateUpstreamTLS(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"empty block", endpoint(url + "    tls: {}\n"),
			[]string{"endpoints.payment-api.tls: set client_cert_file and client_key_file, ca_file, or both"}},
		{"cert without key", endpoint(url + "    tls: {client_cert_file: {{dir}}/cert.pem}\n"),
			[]string{"endpoints.payment-api.tls.client_key_file: required when client_cert_file is set"}},
		{"key without cert", endpoint(url + "    tls: {client_key_file: {{dir}}/key.pem}\n"),
			[]string{"endpoints.payment-api.tls.client_cert_file: required when client_key_file is set"}},
		{"http upstream", endpoint("    url: http://api.example.com/v2\n    tls: {ca_file: {{dir}}/cert.pem}\n"),
			[]string{"endpoints.payment-api.tls: applies to https upstreams only"}},
		{"pair that does not load", endpoint(url + "    tls: {client_cert_file: {{dir}}/cert.pem, client_key_file: {{dir}}/junk.txt}\n"),
			[]string{"endpoints.payment-api.tls.client_cert_file: cannot load it with client_key_file"}},
		{"ca missing and ca not pem", endpoint(url + "    tls: {ca_file: {{dir}}/none.pem}\n" +
			"    oauth2:\n      token_url: https://auth.example.com/token\n      client_id: {env: SF_CLIENT_ID}\n" +
			"      client_secret: {env: PAYMENT_AUTH}\n      ca_file: {{dir}}/key.pem\n"),
			[]string{"endpoints.payment-api.tls.ca_file: open ", "endpoints.payment-api.oauth2.ca_file: holds no PEM CERTIFICATE"}},
	})
}
