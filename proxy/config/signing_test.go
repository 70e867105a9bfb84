package config_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
)

// whsec is a valid Standard Webhooks HMAC secret (24 bytes).
var whsec = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdefghijklmn"))

// TestParseSigning: both signing blocks decode into the endpoint, relative
// secret files resolve against the configuration's directory, and the
// signing headers are listed for redaction.
func TestParseSigning(t *testing.T) {
	dir := keyFiles(t)
	credtest.WriteFile(t, dir, "hook-next.txt", []byte(whsec+"\n"))
	credtest.WriteFile(t, dir, "aws-secret.txt", []byte("aws-secret-access-key\n"))
	env := baseEnv()
	env["AWS_KEY_ID"] = "AKIDEXAMPLE"
	text := doc(map[string]string{"endpoints": `endpoints:
  hooks:
    url: https://receiver.example.com/webhooks
    standard_webhooks:
      secrets: [{env: HOOK_SECRET}, {file: hook-next.txt}]
  aws-api:
    url: https://abc123.execute-api.eu-west-1.amazonaws.com/prod
    aws_sigv4:
      region: eu-west-1
      service: execute-api
      access_key_id: {env: AWS_KEY_ID}
      secret_access_key: {file: aws-secret.txt}
  aws-chain:
    url: https://abc123.lambda-url.eu-west-1.on.aws
    aws_sigv4: {region: eu-west-1, service: lambda}
`}, dir)
	cfg, err := config.Load(credtest.WriteFile(t, dir, "config.yaml", []byte(text)), env.get)
	if err != nil {
		t.Fatal(err)
	}
	hooks, aws, chain := cfg.Endpoints["hooks"], cfg.Endpoints["aws-api"], cfg.Endpoints["aws-chain"]
	wantHooks := config.StandardWebhooks{Secrets: []config.SecretRef{{Env: "HOOK_SECRET"}, {File: filepath.Join(dir, "hook-next.txt")}}}
	if !reflect.DeepEqual(*hooks.StandardWebhooks, wantHooks) {
		t.Errorf("standard_webhooks = %+v, want %+v", *hooks.StandardWebhooks, wantHooks)
	}
	wantAWS := config.AWSSigV4{Region: "eu-west-1", Service: "execute-api", AccessKeyID: config.SecretRef{Env: "AWS_KEY_ID"},
		SecretAccessKey: config.SecretRef{File: filepath.Join(dir, "aws-secret.txt")}}
	if !reflect.DeepEqual(*aws.AWSSigV4, wantAWS) || !aws.AWSSigV4.Static() || chain.AWSSigV4.Static() {
		t.Errorf("aws_sigv4 = %+v (static %v), chain static %v", *aws.AWSSigV4, aws.AWSSigV4.Static(), chain.AWSSigV4.Static())
	}
	if got := hooks.SigningHeaders(); !reflect.DeepEqual(got, []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}) {
		t.Errorf("webhook signing headers = %v", got)
	}
	if got := aws.SigningHeaders(); !reflect.DeepEqual(got, []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}) {
		t.Errorf("aws signing headers = %v", got)
	}
}

func TestValidateSigning(t *testing.T) {
	const aws = "    aws_sigv4:\n      region: eu-west-1\n      service: execute-api\n"
	runInvalid(t, []invalidCase{
		{"no secrets", endpoint(url + "    standard_webhooks: {secrets: []}\n"),
			[]string{"endpoints.payment-api.standard_webhooks.secrets: required"}},
		{"too many secrets", endpoint(url + "    standard_webhooks: {secrets: [{env: HOOK_SECRET}, {env: HOOK_SECRET}, {env: HOOK_SECRET}, {env: HOOK_SECRET}, {env: HOOK_SECRET}]}\n"),
			[]string{"endpoints.payment-api.standard_webhooks.secrets: at most 4 secrets"}},
		{"inline secret", endpoint(url + "    standard_webhooks: {secrets: [" + whsec + "]}\n"),
			[]string{"endpoints.payment-api.standard_webhooks.secrets[0]: must be {env: VARIABLE} or {file: PATH}"}},
		{"both env and file", endpoint(url + "    standard_webhooks: {secrets: [{env: A, file: b}]}\n"),
			[]string{"endpoints.payment-api.standard_webhooks.secrets[0]: set exactly one of env and file"}},
		{"secret unset", endpoint(url + "    standard_webhooks: {secrets: [{env: NO_SUCH_SECRET}]}\n"),
			[]string{"endpoints.payment-api.standard_webhooks.secrets[0]: env NO_SUCH_SECRET: environment variable NO_SUCH_SECRET is not set"}},
		{"not a webhook secret", endpoint(url + "    standard_webhooks: {secrets: [{env: PAYMENT_AUTH}]}\n"),
			[]string{"endpoints.payment-api.standard_webhooks.secrets[0]: env PAYMENT_AUTH: not a Standard Webhooks secret"}},
		{"webhook header configured", endpoint(url + "    headers: {webhook-id: {env: PAYMENT_AUTH}}\n" +
			"    standard_webhooks: {secrets: [{env: HOOK_SECRET}]}\n"),
			[]string{"endpoints.payment-api.headers.Webhook-Id: conflicts with the endpoint's signature"}},
		{"aws names", endpoint(url + "    aws_sigv4: {service: Execute API}\n"),
			[]string{"endpoints.payment-api.aws_sigv4.region: required", `endpoints.payment-api.aws_sigv4.service: "Execute API" is not an AWS service name`}},
		{"aws key without secret", endpoint(url + aws + "      access_key_id: {env: SF_CLIENT_ID}\n"),
			[]string{"endpoints.payment-api.aws_sigv4: set access_key_id and secret_access_key together, or neither"}},
		{"aws token alone", endpoint(url + aws + "      session_token: {env: SF_CLIENT_ID}\n"),
			[]string{"endpoints.payment-api.aws_sigv4.session_token: needs access_key_id and secret_access_key"}},
		{"aws secret unset and a newline", endpoint(url + aws + "      access_key_id: {env: NEWLINE}\n      secret_access_key: {env: NO_AWS}\n"),
			[]string{"endpoints.payment-api.aws_sigv4.access_key_id: the value from env NEWLINE contains a control character",
				"endpoints.payment-api.aws_sigv4.secret_access_key: environment variable NO_AWS is not set"}},
		{"aws with oauth2", endpoint(url + aws + oauth2Block),
			[]string{"endpoints.payment-api.aws_sigv4: conflicts with oauth2"}},
		{"aws with an Authorization header", endpoint(url + "    headers: {Authorization: {env: PAYMENT_AUTH}}\n" + aws),
			[]string{"endpoints.payment-api.headers.Authorization: conflicts with the endpoint's signature"}},
	})
}

// TestParseWebhookKey: the secret formats of the Standard Webhooks
// specification ("Signature scheme": whsec_ for HMAC-SHA256, whsk_ for an
// Ed25519 key); no error quotes the value.
func TestParseWebhookKey(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	other := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	mismatched := append(append([]byte{}, priv[:32]...), other[32:]...)
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name, v, scheme, err string
	}{
		{"hmac", whsec, config.WebhookHMAC, ""},
		{"hmac 64 bytes", "whsec_" + b64(make([]byte, 64)), config.WebhookHMAC, ""},
		{"hmac too short", "whsec_" + b64(make([]byte, 23)), "", "24 to 64 bytes"},
		{"hmac too long", "whsec_" + b64(make([]byte, 65)), "", "24 to 64 bytes"},
		{"hmac not base64", "whsec_not*base64", "", "not standard base64"},
		{"ed25519 seed", "whsk_" + b64(seed), config.WebhookEd25519, ""},
		{"ed25519 private key", "whsk_" + b64(priv), config.WebhookEd25519, ""},
		{"ed25519 mismatched halves", "whsk_" + b64(mismatched), "", "does not match"},
		{"ed25519 wrong size", "whsk_" + b64(make([]byte, 31)), "", "32-byte Ed25519 seed"},
		{"public key", "whpk_" + b64(priv.Public().(ed25519.PublicKey)), "", "must start with whsec_"},
		{"no prefix", b64(make([]byte, 32)), "", "must start with whsec_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := config.ParseWebhookKey(tt.v)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), tt.v) {
					t.Fatalf("err = %v, want %q without the value", err, tt.err)
				}
				return
			}
			if err != nil || k.Scheme != tt.scheme {
				t.Fatalf("key = %+v, %v; want scheme %s", k, err, tt.scheme)
			}
			if tt.scheme == config.WebhookEd25519 && !k.Ed25519.Equal(priv) {
				t.Errorf("Ed25519 key differs from the one of the seed")
			}
		})
	}
}
