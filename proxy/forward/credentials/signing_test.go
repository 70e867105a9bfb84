package credentials_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// received is one request as a signing test's upstream got it.
type received struct {
	req  *http.Request
	body []byte
}

// signRig is a forwarder on an injected clock in front of an upstream that
// answers with the next of its statuses (200 once they run out) and keeps
// every request.
type signRig struct {
	clock *clocktest.Clock
	fwd   *forward.Forwarder
	ep    *config.Endpoint

	mu       sync.Mutex
	got      []received
	statuses []int
}

// newSignRig parses one endpoint "hooks" with the YAML lines extra (each
// indented four spaces) under env, its clock at start.
func newSignRig(t *testing.T, start time.Time, extra string, env map[string]string, statuses ...int) *signRig {
	t.Helper()
	rig := &signRig{clock: clocktest.New(start), statuses: statuses}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rig.mu.Lock()
		rig.got = append(rig.got, received{req: r.Clone(context.Background()), body: b})
		status := http.StatusOK
		if len(rig.statuses) > 0 {
			status, rig.statuses = rig.statuses[0], rig.statuses[1:]
		}
		rig.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(up.Close)
	env["SIGN_JWT"] = "sign-rig-secret-of-at-least-32-bytes!!"
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Parse([]byte(`auth:
  issuers: [https://sign.my.salesforce.com]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: SIGN_JWT
endpoints:
  hooks:
    url: `+up.URL+`
    allowed_networks: [127.0.0.0/8]
`+extra), getenv)
	if err != nil {
		t.Fatal(err)
	}
	rig.ep, _ = cfg.Endpoint("hooks")
	rig.fwd = forward.New(forward.Options{Now: rig.clock.Now, Getenv: getenv})
	t.Cleanup(rig.fwd.CloseIdleConnections)
	return rig
}

// do makes one attempt of a POST of body for callout id and returns what
// the upstream received.
func (rig *signRig) do(t *testing.T, id, body string) received {
	t.Helper()
	a := rig.fwd.Do(context.Background(), rig.ep, &forward.Request{Method: http.MethodPost, Path: "/events",
		Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {`"k-1"`}},
		Body:   []byte(body), CalloutID: id})
	if a.Err != nil {
		t.Fatalf("attempt: %v", a.Err)
	}
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return rig.got[len(rig.got)-1]
}

// secretOf is a whsec_ secret of 32 bytes made of b.
func secretOf(b byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

// verifier is the official Standard Webhooks Go library's verifier of secret.
func verifier(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// TestWebhooksRetrySignedAtSendTime: a callout accepted 6 minutes ago (the
// injected clock) whose first attempt got 503 is retried now. The first
// attempt's signature is valid but, verified now, outside the library's
// 5-minute tolerance; the retry is signed at its own send time, so the
// official verifier accepts it — with the same webhook-id, which the
// receiver deduplicates on (Standard Webhooks "Webhook metadata").
func TestWebhooksRetrySignedAtSendTime(t *testing.T) {
	secret := secretOf(7)
	accepted := time.Now().Add(-6 * time.Minute)
	rig := newSignRig(t, accepted, "    standard_webhooks: {secrets: [{env: HOOK_SECRET}]}\n",
		map[string]string{"HOOK_SECRET": secret}, http.StatusServiceUnavailable)
	wh := verifier(t, secret)
	const body = `{"type":"invoice.paid","data":{"id":"inv_1"}}`

	first := rig.do(t, "0aCALLOUT1", body)
	if err := wh.Verify(first.body, first.req.Header); !errors.Is(err, standardwebhooks.ErrMessageTooOld) {
		t.Errorf("first attempt verified now: %v, want ErrMessageTooOld (it was signed 6 minutes ago)", err)
	}
	if err := wh.VerifyIgnoringTimestamp(first.body, first.req.Header); err != nil {
		t.Errorf("first attempt's signature: %v", err)
	}
	rig.clock.Advance(6 * time.Minute)
	retry := rig.do(t, "0aCALLOUT1", body)
	if err := wh.Verify(retry.body, retry.req.Header); err != nil {
		t.Fatalf("retry 6 minutes after acceptance: %v", err)
	}
	id1, id2 := first.req.Header.Get("webhook-id"), retry.req.Header.Get("webhook-id")
	if id1 != "msg_0aCALLOUT1" || id2 != id1 {
		t.Errorf("webhook-id = %q then %q, want msg_0aCALLOUT1 both times", id1, id2)
	}
	t1, _ := strconv.ParseInt(first.req.Header.Get("webhook-timestamp"), 10, 64)
	t2, _ := strconv.ParseInt(retry.req.Header.Get("webhook-timestamp"), 10, 64)
	if t1 != accepted.Unix() || t2-t1 != 360 {
		t.Errorf("webhook-timestamp = %d then %d, want the acceptance time then 360 s later", t1, t2)
	}
	if err := wh.Verify([]byte(strings.Replace(body, "inv_1", "inv_2", 1)), retry.req.Header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("tampered body: %v, want ErrNoMatchingSignature", err)
	}
	// A replay is a new callout: a new id. A read without a record gets a
	// fresh one per attempt.
	replay := rig.do(t, "0aREPLAY2", body)
	other := rig.do(t, "", body)
	again := rig.do(t, "", body)
	if replay.req.Header.Get("webhook-id") != "msg_0aREPLAY2" || wh.Verify(replay.body, replay.req.Header) != nil {
		t.Errorf("replay webhook-id = %q", replay.req.Header.Get("webhook-id"))
	}
	if a, b := other.req.Header.Get("webhook-id"), again.req.Header.Get("webhook-id"); !strings.HasPrefix(a, "msg_") ||
		len(a) < 20 || a == b || wh.Verify(other.body, other.req.Header) != nil {
		t.Errorf("webhook-ids without a callout = %q, %q: want two fresh ones", a, b)
	}
}

// TestWebhooksRotation: during a rotation both secrets sign; a verifier
// holding either accepts, one holding neither refuses. Replacing the second
// secret's file is picked up by the next attempt after the re-check
// interval, without a new Set; a file that turns bad keeps the previous key.
func TestWebhooksRotation(t *testing.T) {
	old, next, third := secretOf(1), secretOf(2), secretOf(3)
	dir := t.TempDir()
	file := filepath.Join(dir, "next")
	if err := os.WriteFile(file, []byte(next+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rig := newSignRig(t, time.Now(), "    standard_webhooks: {secrets: [{env: HOOK_OLD}, {file: "+file+"}]}\n",
		map[string]string{"HOOK_OLD": old})
	got := rig.do(t, "0aROTATE", `{"n":1}`)
	sigs := strings.Split(got.req.Header.Get("webhook-signature"), " ")
	if len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Fatalf("webhook-signature = %q, want two v1 signatures", got.req.Header.Get("webhook-signature"))
	}
	for _, s := range []string{old, next} {
		if err := verifier(t, s).Verify(got.body, got.req.Header); err != nil {
			t.Errorf("verifier with one of the secrets: %v", err)
		}
	}
	if err := verifier(t, third).Verify(got.body, got.req.Header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("verifier with another secret: %v, want ErrNoMatchingSignature", err)
	}

	if err := os.WriteFile(file, []byte(third+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rig.clock.Advance(2 * time.Second)
	got = rig.do(t, "0aROTATE", `{"n":2}`)
	if err := verifier(t, third).Verify(got.body, got.req.Header); err != nil {
		t.Errorf("after the file rotated: %v", err)
	}
	if err := verifier(t, next).Verify(got.body, got.req.Header); err == nil {
		t.Errorf("the replaced secret still signs")
	}
	if err := os.WriteFile(file, []byte("not-a-webhook-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rig.clock.Advance(2 * time.Second)
	got = rig.do(t, "0aROTATE", `{"n":3}`)
	if err := verifier(t, third).Verify(got.body, got.req.Header); err != nil {
		t.Errorf("a bad new file must keep the previous key: %v", err)
	}
}

// TestWebhooksEd25519: a whsk_ key (Standard Webhooks "Signature scheme":
// base64 Ed25519 key, signature identifier v1a) signs "id.timestamp.body";
// the signature verifies with the public key (whpk_). The official Go
// library at the version the module proxy serves verifies v1 only, so
// crypto/ed25519 verifies here. Beside a whsec_ secret both are sent.
func TestWebhooksEd25519(t *testing.T) {
	seed := bytes.Repeat([]byte{9}, ed25519.SeedSize)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	hmacSecret := secretOf(4)
	rig := newSignRig(t, time.Now(), "    standard_webhooks: {secrets: [{env: HOOK_ED}, {env: HOOK_HMAC}]}\n",
		map[string]string{"HOOK_ED": "whsk_" + base64.StdEncoding.EncodeToString(seed), "HOOK_HMAC": hmacSecret})
	got := rig.do(t, "0aED", `{"a":1}`)
	sigs := strings.Split(got.req.Header.Get("webhook-signature"), " ")
	v1a, ok := strings.CutPrefix(sigs[0], "v1a,")
	if len(sigs) != 2 || !ok {
		t.Fatalf("webhook-signature = %q, want v1a then v1", got.req.Header.Get("webhook-signature"))
	}
	sig, err := base64.StdEncoding.DecodeString(v1a)
	content := got.req.Header.Get("webhook-id") + "." + got.req.Header.Get("webhook-timestamp") + "." + string(got.body)
	if err != nil || !ed25519.Verify(pub, []byte(content), sig) {
		t.Errorf("v1a signature does not verify with the public key (%v)", err)
	}
	if ed25519.Verify(pub, []byte(content+"x"), sig) {
		t.Errorf("v1a signature verifies a tampered body")
	}
	if err := verifier(t, hmacSecret).Verify(got.body, got.req.Header); err != nil {
		t.Errorf("the v1 signature beside it: %v", err)
	}
}

// TestSigV4: every attempt is signed at its send time with the configured
// keys and session token, payload hash included; a verifier that signs
// the received request again with the SDK's own signer agrees, and
// refuses a tampered body.
func TestSigV4(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		SessionToken: "session-token-EXAMPLE"}
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	rig := newSignRig(t, start, "    aws_sigv4: {region: eu-west-1, service: execute-api, access_key_id: {env: AK}, "+
		"secret_access_key: {env: SK}, session_token: {env: ST}}\n",
		map[string]string{"AK": creds.AccessKeyID, "SK": creds.SecretAccessKey, "ST": creds.SessionToken},
		http.StatusServiceUnavailable)
	const body = `{"detail":"order placed"}`
	first := rig.do(t, "0aAWS", body)
	rig.clock.Advance(6 * time.Minute)
	retry := rig.do(t, "0aAWS", body)
	for i, got := range []received{first, retry} {
		if err := credtest.VerifySigV4(got.req, got.body, creds, "execute-api", "eu-west-1"); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
	if d1, d2 := first.req.Header.Get("X-Amz-Date"), retry.req.Header.Get("X-Amz-Date"); d1 != "20260302T090000Z" || d2 != "20260302T090600Z" {
		t.Errorf("X-Amz-Date = %s then %s, want each attempt's send time", d1, d2)
	}
	if auth := retry.req.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260302/eu-west-1/execute-api/aws4_request") ||
		!strings.Contains(auth, "x-amz-content-sha256") || !strings.Contains(auth, "idempotency-key") {
		t.Errorf("Authorization = %q, want the credential scope and the body hash and key signed", auth)
	}
	if err := credtest.VerifySigV4(retry.req, []byte(`{"detail":"order cancelled"}`), creds, "execute-api", "eu-west-1"); err == nil {
		t.Errorf("a tampered body verified")
	}
	wrong := creds
	wrong.SecretAccessKey = "another-secret"
	if err := credtest.VerifySigV4(retry.req, retry.body, wrong, "execute-api", "eu-west-1"); err == nil {
		t.Errorf("another secret key verified")
	}
}

// TestSigV4Chain: without configured keys the standard AWS credential chain
// signs — here a shared credentials file named by the environment, with the
// EC2 instance metadata client disabled so nothing leaves the machine.
// An empty chain is a retryable credentials failure, not a send.
func TestSigV4Chain(t *testing.T) {
	dir := t.TempDir()
	credsFile := filepath.Join(dir, "credentials")
	if err := os.WriteFile(credsFile, []byte("[default]\naws_access_key_id = AKIDCHAIN\naws_secret_access_key = chain-secret-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	isolateAWSEnv(t, dir)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credsFile)
	rig := newSignRig(t, time.Now(), "    aws_sigv4: {region: us-east-1, service: lambda}\n", map[string]string{})
	got := rig.do(t, "0aCHAIN", `{}`)
	creds := aws.Credentials{AccessKeyID: "AKIDCHAIN", SecretAccessKey: "chain-secret-key"}
	if err := credtest.VerifySigV4(got.req, got.body, creds, "lambda", "us-east-1"); err != nil {
		t.Fatal(err)
	}

	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	empty := newSignRig(t, time.Now(), "    aws_sigv4: {region: us-east-1, service: lambda}\n", map[string]string{})
	a := empty.fwd.Do(context.Background(), empty.ep, &forward.Request{Method: http.MethodPost, Path: "/x", CalloutID: "0aNONE"})
	if !errors.Is(a.Err, policy.ErrCredentials) || a.Sent || len(empty.got) != 0 {
		t.Errorf("empty chain: err %v, sent %v; want a credentials failure and nothing sent", a.Err, a.Sent)
	}
	if c := a.Classify(); c.Outcome != policy.Retryable || c.Reason != policy.ReasonCredentials {
		t.Errorf("empty chain classified %+v, want retryable credentials", c)
	}
}

// isolateAWSEnv empties every variable of the AWS chain's other sources
// and disables the EC2 instance metadata client, so the chain reads only
// what the test gives it.
func isolateAWSEnv(t *testing.T, dir string) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config-none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// TestSigV4QueryAsSent: the upstream gets the caller's query byte for byte
// (contract §4), signed — repeated keys in their order, '+' and reserved
// characters untouched — while the signer's canonical form is only what it
// signs; a query the signer would alter (a ';' separator, a bad %-escape)
// is refused with invalid-request before anything is sent.
func TestSigV4QueryAsSent(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	rig := newSignRig(t, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC),
		"    aws_sigv4: {region: eu-west-1, service: execute-api, access_key_id: {env: AK}, secret_access_key: {env: SK}}\n",
		map[string]string{"AK": creds.AccessKeyID, "SK": creds.SecretAccessKey})
	for _, q := range []string{
		"ids=3&ids=1&ids=2",
		"b=2&a=1&a=0&noval&plus=a+b",
		"ts=2024-01-01T00:00:00+01:00",
		"name=J%C3%BCrgen&path=%2Fa%2Fb&sp=%20x",
	} {
		a := rig.fwd.Do(context.Background(), rig.ep, &forward.Request{Method: http.MethodGet, Path: "/q", RawQuery: q, CalloutID: "q1"})
		if a.Err != nil {
			t.Fatalf("%s: attempt: %v", q, a.Err)
		}
		rig.mu.Lock()
		got := rig.got[len(rig.got)-1]
		rig.mu.Unlock()
		if got.req.URL.RawQuery != q {
			t.Errorf("upstream got query %q, want %q as sent", got.req.URL.RawQuery, q)
		}
		if err := credtest.VerifySigV4(got.req, got.body, creds, "execute-api", "eu-west-1"); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	n := len(rig.got)
	for _, q := range []string{"a=1;b=2&c=3", "x=%zz&y=1"} {
		a := rig.fwd.Do(context.Background(), rig.ep, &forward.Request{Method: http.MethodGet, Path: "/q", RawQuery: q, CalloutID: "q2"})
		var pe *problem.Error
		if !errors.As(a.Err, &pe) || pe.Code != problem.InvalidRequest {
			t.Errorf("%s: err = %v, want invalid-request", q, a.Err)
		}
	}
	if len(rig.got) != n {
		t.Errorf("a refused query reached the upstream")
	}
}
