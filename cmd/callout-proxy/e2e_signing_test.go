package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// failOnce answers 503 to the first POST of each path and 201 after, and
// 400 to every POST of a path ending in /reject until the path was
// rejected once (so a dead letter's replay then succeeds).
func failOnce() http.HandlerFunc {
	var mu sync.Mutex
	seen := map[string]int{}
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		switch {
		case r.Method != http.MethodPost:
		case strings.HasSuffix(r.URL.Path, "/reject") && n == 1:
			w.WriteHeader(http.StatusBadRequest)
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}
}

// posts are the POSTs u received for requestURI, in order.
func posts(u *proctest.Upstream, requestURI string) []proctest.Request {
	var out []proctest.Request
	for _, s := range u.Requests(requestURI) {
		if s.Method == http.MethodPost {
			out = append(out, s)
		}
	}
	return out
}

// TestE2EStandardWebhooks runs the program with a standard_webhooks
// endpoint during a key rotation (one secret from the environment, one
// from a file): a keyed write that gets 503 on its synchronous attempt and
// succeeds on the dispatcher's retry reaches the receiver twice, each
// attempt verified by the official Standard Webhooks Go library with either
// secret, both with the webhook-id msg_<callout id> that its status
// document shows. A dead letter replayed through the admin API arrives
// with the replay's own webhook-id, and the replay's document links the
// original's. No secret, signature or signing header value reaches the
// logs, the status documents, the admin documents, the console, the
// metrics or the spans.
func TestE2EStandardWebhooks(t *testing.T) {
	t.Parallel()
	oldSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-webhook-secret-OLD-0123456789"))
	newSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-webhook-secret-NEW-9876543210"))
	secretFile := credtest.WriteFile(t, t.TempDir(), "hooks-next", []byte(newSecret+"\n"))
	rc := newOTLPReceiver(t)
	up := proctest.NewUpstream(t, failOnce())
	cfg := withPolicy(devConfig(proctest.Endpoint("hooks", up.URL, loopbackNets,
		"standard_webhooks: {secrets: [{env: E2E_HOOK_SECRET}, {file: "+secretFile+"}]}")),
		"base_delay: 10ms", "max_delay: 20ms") +
		"tracing:\n  endpoint: " + rc.URL + "\n  sample_ratio: 1\n"
	p := startProxy(t, cfg, envWith("E2E_HOOK_SECRET", oldSecret))

	const payload = `{"type":"invoice.paid","data":{"id":"inv_42"}}`
	resp, body := p.call(t, http.MethodPost, "/callout/hooks/v1/events", strings.NewReader(payload), keyed("hook-1", false))
	d := statusDoc(t, body)
	if resp.StatusCode != http.StatusAccepted || d.ID == "" {
		t.Fatalf("write = %d %s, want 202 after the 503", resp.StatusCode, body)
	}
	waitState(t, p, d.ID, "succeeded")
	_, doc := p.call(t, http.MethodGet, "/v1/callouts/"+d.ID, nil, nil)
	docs := []string{string(body), string(doc)}
	if got := statusDoc(t, doc); got.WebhookID != "msg_"+d.ID || len(got.Attempts) != 2 {
		t.Errorf("status document = %s, want webhook_id msg_%s and 2 attempts", doc, d.ID)
	}
	attempts := posts(up, "/v1/events")
	if len(attempts) != 2 {
		t.Fatalf("the receiver got %d POSTs, want the 503'd attempt and the retry", len(attempts))
	}
	for i, a := range attempts {
		for _, s := range []string{oldSecret, newSecret} {
			wh, err := standardwebhooks.NewWebhook(s)
			if err == nil {
				err = wh.Verify(a.Body, a.Header)
			}
			if err != nil {
				t.Errorf("attempt %d does not verify: %v", i+1, err)
			}
		}
		if id := a.Header.Get("webhook-id"); id != "msg_"+d.ID {
			t.Errorf("attempt %d webhook-id = %q, want msg_%s", i+1, id, d.ID)
		}
		if n := len(strings.Split(a.Header.Get("webhook-signature"), " ")); n != 2 {
			t.Errorf("attempt %d carries %d signatures, want one per secret", i+1, n)
		}
	}

	// A dead letter (permanent 400 on the dispatcher's attempt), replayed.
	resp, body = p.call(t, http.MethodPost, "/callout/hooks/v1/reject", strings.NewReader(payload), keyed("hook-2", true))
	orig := statusDoc(t, body).ID
	if resp.StatusCode != http.StatusAccepted || orig == "" {
		t.Fatalf("async write = %d %s", resp.StatusCode, body)
	}
	waitState(t, p, orig, "dead_lettered")
	replayID := replaySucceeds(t, p, orig)
	_, doc = p.call(t, http.MethodGet, "/v1/callouts/"+replayID, nil, nil)
	rd := statusDoc(t, doc)
	if rd.WebhookID != "msg_"+replayID || rd.ReplayOf != orig || rd.ReplayOfWebhookID != "msg_"+orig {
		t.Errorf("replay document = %s, want its own webhook_id linked to msg_%s", doc, orig)
	}
	rejects := posts(up, "/v1/reject")
	if len(rejects) != 2 || rejects[0].Header.Get("webhook-id") != "msg_"+orig ||
		rejects[1].Header.Get("webhook-id") != "msg_"+replayID {
		t.Errorf("the dead letter and its replay reached the receiver %d times with ids %q", len(rejects), webhookIDs(rejects))
	}
	_, adminDoc := admin(t, p.AdminURL, http.MethodGet, "/admin/v1/dead-letters/"+orig, opsToken, nil)
	docs = append(docs, string(doc), string(adminDoc), metricsText(t, p))
	pages := consolePages(t, p, "/dead-letters", "/dead-letters/"+orig, "/callouts?id="+d.ID)
	if !strings.Contains(pages[1], orig) || !strings.Contains(pages[1], "/v1/reject") {
		t.Errorf("the console's dead-letter page does not show the dead letter:\n%s", pages[1])
	}
	docs = append(docs, pages...)
	if err := p.stop(); err != nil { // flushes the spans
		t.Fatal(err)
	}

	needles := []string{oldSecret, newSecret, strings.TrimPrefix(oldSecret, "whsec_"), strings.TrimPrefix(newSecret, "whsec_")}
	for _, a := range append(attempts, rejects...) {
		for _, sig := range strings.Split(a.Header.Get("webhook-signature"), " ") {
			needles = append(needles, strings.TrimPrefix(sig, "v1,"))
		}
	}
	noSecrets(t, p, rc, docs, needles)
}

// webhookIDs lists the webhook-id of each request.
func webhookIDs(rs []proctest.Request) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.Header.Get("webhook-id"))
	}
	return ids
}

// TestE2EAWSSigV4 runs the program with an aws_sigv4 endpoint whose keys
// and session token come from the environment and a file: a keyed write
// that gets 503 and then succeeds on the dispatcher's retry reaches the
// upstream twice, each attempt verified by signing the received request
// again with the AWS SDK's own signer (same credentials, same time); the
// same verifier refuses the received signature over a tampered body. No
// key, token or signature reaches any output.
func TestE2EAWSSigV4(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKIDE2EEXAMPLE", SecretAccessKey: "e2e/SECRET+access+key/EXAMPLE0123456789",
		SessionToken: "e2e-SESSION-token-EXAMPLE-0123456789"}
	skFile := credtest.WriteFile(t, t.TempDir(), "aws-secret", []byte(creds.SecretAccessKey+"\n"))
	rc := newOTLPReceiver(t)
	up := proctest.NewUpstream(t, failOnce())
	cfg := withPolicy(devConfig(proctest.Endpoint("aws-api", up.URL, loopbackNets,
		"aws_sigv4: {region: eu-west-1, service: execute-api, access_key_id: {env: E2E_AWS_KEY}, "+
			"secret_access_key: {file: "+skFile+"}, session_token: {env: E2E_AWS_TOKEN}}")),
		"base_delay: 10ms", "max_delay: 20ms") +
		"tracing:\n  endpoint: " + rc.URL + "\n  sample_ratio: 1\n"
	p := startProxy(t, cfg, envWith("E2E_AWS_KEY", creds.AccessKeyID, "E2E_AWS_TOKEN", creds.SessionToken))

	const payload = `{"source":"salesforce","detail":{"order":"42"}}`
	resp, body := p.call(t, http.MethodPost, "/callout/aws-api/prod/orders?stage=1", strings.NewReader(payload),
		keyed("aws-1", false))
	id := statusDoc(t, body).ID
	if resp.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("write = %d %s, want 202 after the 503", resp.StatusCode, body)
	}
	waitState(t, p, id, "succeeded")
	_, doc := p.call(t, http.MethodGet, "/v1/callouts/"+id, nil, nil)
	attempts := posts(up, "/prod/orders?stage=1")
	if len(attempts) != 2 {
		t.Fatalf("the upstream got %d POSTs, want the 503'd attempt and the retry", len(attempts))
	}
	host := strings.TrimPrefix(up.URL, "http://")
	needles := []string{creds.SecretAccessKey, creds.SessionToken}
	for i, a := range attempts {
		r := &http.Request{Method: a.Method, RequestURI: a.RequestURI, Host: host, Header: a.Header}
		if err := credtest.VerifySigV4(r, a.Body, creds, "execute-api", "eu-west-1"); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
		if string(a.Body) != payload || a.Header.Get("Idempotency-Key") != `"aws-1"` {
			t.Errorf("attempt %d body %s key %q", i+1, a.Body, a.Header.Get("Idempotency-Key"))
		}
		if err := credtest.VerifySigV4(r, bytes.Replace(a.Body, []byte("42"), []byte("43"), 1), creds,
			"execute-api", "eu-west-1"); err == nil {
			t.Errorf("attempt %d: a tampered body verified", i+1)
		}
		_, sig, _ := strings.Cut(a.Header.Get("Authorization"), "Signature=")
		needles = append(needles, sig)
	}
	_, adminDoc := admin(t, p.AdminURL, http.MethodGet, "/admin/v1/callouts/"+id, opsToken, nil)
	pages := consolePages(t, p, "/callouts?id="+id)
	if !strings.Contains(pages[0], id) {
		t.Errorf("the console's callouts page does not show the callout:\n%s", pages[0])
	}
	docs := append([]string{string(body), string(doc), string(adminDoc), metricsText(t, p)}, pages...)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	noSecrets(t, p, rc, docs, needles)
}

// noSecrets fails the test when any needle appears in the logs of p, in
// docs (status and admin documents, metrics, console pages, read while p
// ran) or in the attributes of the spans rc received.
func noSecrets(t *testing.T, p *proxyUnderTest, rc *otlpReceiver, docs, needles []string) {
	t.Helper()
	texts := map[string]string{"logs": p.logs.String(), "documents": strings.Join(docs, "\n")}
	rc.mu.Lock()
	var spans strings.Builder
	for _, s := range rc.spans {
		for k, v := range s.Attrs {
			spans.WriteString(k + "=" + v + "\n")
		}
	}
	n := len(rc.spans)
	rc.mu.Unlock()
	texts["spans"] = spans.String()
	if n == 0 {
		t.Errorf("no spans were received: the spans check saw nothing")
	}
	for where, text := range texts {
		for _, s := range needles {
			if s != "" && strings.Contains(text, s) {
				t.Errorf("%s carry a secret or signature (%.10s…)", where, s)
			}
		}
	}
}

// consolePages logs into the console of p with the ops token and returns
// the HTML of each path below /console.
func consolePages(t *testing.T, p *proxyUnderTest, paths ...string) []string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	page := func(resp *http.Response, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("console %s: %d %s", resp.Request.URL.Path, resp.StatusCode, b)
		}
		return string(b)
	}
	login := page(c.Get(p.AdminURL + "/console/login"))
	m := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(login)
	if m == nil {
		t.Fatalf("no nonce in the console's login form:\n%s", login)
	}
	page(c.PostForm(p.AdminURL+"/console/login", url.Values{"nonce": {m[1]}, "token": {testEnv()["TEST_ADMIN_TOKEN"]}}))
	var out []string
	for _, path := range paths {
		out = append(out, page(c.Get(p.AdminURL+"/console"+path)))
	}
	return out
}
