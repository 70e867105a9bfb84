package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// Client credentials of TestE2ECredentials; none may leave the proxy
// anywhere but towards the token server.
const (
	e2eClientID     = "e2e-client"
	e2eClientSecret = "e2e-client-SECRET-0123456789abcdef"
)

// TestE2ECredentials runs the program with endpoints that authenticate the
// way a Named Credential used to (contract §10, issue "Upstream credentials"):
//   - oauth-api: OAuth 2.0 client credentials (secret from a file, token
//     server over TLS with a private CA); the upstream gets the token, never
//     the caller's JWT;
//   - oauth-down: its token server is down: a read gets 502 retryable, a
//     write is scheduled with attempt error "credentials";
//   - mtls-api / mtls-nocert: an upstream that requires a client
//     certificate accepts the configured one and refuses the endpoint
//     without it (retryable, TLS).
//
// Then: no client secret, token or private key in the logs, the status
// documents or the metrics.
func TestE2ECredentials(t *testing.T) {
	t.Parallel()
	p, ts, up, keyPEM := startCredentialsProxy(t)
	var docs []string

	t.Run("oauth2 read and write", func(t *testing.T) {
		resp, body := p.call(t, http.MethodGet, "/callout/oauth-api/v1/balance", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		seen := up.Request(t, "/v1/balance")
		if !ts.Valid(seen.Header.Get("Authorization")) {
			t.Errorf("upstream Authorization is not the minted token")
		}
		resp, body = p.call(t, http.MethodPost, "/callout/oauth-api/v1/invalid", strings.NewReader(`{}`), keyed("cred-1", false))
		wantUpstream(t, resp, body, http.StatusBadRequest, policy.Permanent)
		_, doc := p.call(t, http.MethodGet, "/v1/callouts/"+resp.Header.Get("Callout-Id"), nil, nil)
		if d := statusDoc(t, doc); d.State != "failed" || d.Response == nil {
			t.Errorf("status document = %s, want a failed callout with its response", doc)
		}
		docs = append(docs, string(doc))
		if reqs := ts.Requests(); len(reqs) != 1 || reqs[0].Form.Get("scope") != "payments" ||
			reqs[0].Form.Get("audience") != "e2e-api" {
			t.Errorf("token requests = %+v, want one with scope and audience", reqs)
		}
	})

	t.Run("token server down is retryable", func(t *testing.T) {
		resp, body := p.call(t, http.MethodGet, "/callout/oauth-down/v1/balance", nil, nil)
		pb := wantProblem(t, resp, body, http.StatusBadGateway, problem.UpstreamUnavailable, policy.Retryable)
		if !strings.Contains(pb.Detail, "(credentials)") {
			t.Errorf("detail = %q, want the credentials reason", pb.Detail)
		}
		resp, body = p.call(t, http.MethodPost, "/callout/oauth-down/v1/charges", strings.NewReader(`{}`), keyed("cred-2", false))
		d := statusDoc(t, body)
		if resp.StatusCode != http.StatusAccepted || d.State != "scheduled" || len(d.Attempts) != 1 ||
			d.Attempts[0].Error != policy.ReasonCredentials {
			t.Errorf("write = %d %s, want 202 scheduled after a credentials failure", resp.StatusCode, body)
		}
		docs = append(docs, string(body))
	})

	t.Run("mutual TLS", func(t *testing.T) {
		resp, body := p.call(t, http.MethodGet, "/callout/mtls-api/v1/balance", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if cn := resp.Header.Get(credtest.PeerHeader); cn != "e2e-proxy" {
			t.Errorf("upstream saw client certificate %q, want e2e-proxy", cn)
		}
		resp, body = p.call(t, http.MethodGet, "/callout/mtls-nocert/v1/balance", nil, nil)
		pb := wantProblem(t, resp, body, http.StatusBadGateway, problem.UpstreamUnavailable, policy.Retryable)
		if !strings.Contains(pb.Detail, "(tls)") {
			t.Errorf("detail = %q, want the tls reason", pb.Detail)
		}
	})

	_, metricsBody := get(t, p.AdminURL+"/metrics")
	texts := map[string]string{"logs": p.logs.String(), "status documents": strings.Join(docs, "\n"),
		"metrics": string(metricsBody)}
	needles := []string{e2eClientSecret, strings.Split(string(keyPEM), "\n")[1]}
	for _, q := range ts.Requests() {
		needles = append(needles, q.Token)
	}
	for where, text := range texts {
		for _, n := range needles {
			if n != "" && strings.Contains(text, n) {
				t.Errorf("%s carry a credential (%.12s…)", where, n)
			}
		}
	}
}

// startCredentialsProxy starts the token server, the upstreams and the
// program for TestE2ECredentials; it returns the client key's PEM too.
func startCredentialsProxy(t *testing.T) (*proxyUnderTest, *credtest.TokenServer, *proctest.Upstream, []byte) {
	t.Helper()
	ts := credtest.NewTokenServer(t, e2eClientID, e2eClientSecret)
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		ts.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/invalid") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"amount missing"}`))
				return
			}
			okHandler(w, r)
		})).ServeHTTP(w, r)
	})
	ca := credtest.NewCA(t, "e2e client CA")
	mtls, mtlsCA := credtest.MTLSServer(t, ca)
	dir := t.TempDir()
	certPEM, keyPEM := ca.Issue(t, "e2e-proxy")
	certFile := credtest.WriteFile(t, dir, "client.crt", certPEM)
	keyFile := credtest.WriteFile(t, dir, "client.key", keyPEM)
	secretFile := credtest.WriteFile(t, dir, "client-secret", []byte(e2eClientSecret+"\n"))
	oauth := func(tokenURL string) string {
		return fmt.Sprintf("oauth2: {token_url: %q, client_id: {env: E2E_CLIENT_ID}, client_secret: {file: %s}, "+
			"scopes: [payments], audience: e2e-api, ca_file: %s}", tokenURL, secretFile, ts.CAFile)
	}
	cfg := devConfig(
		proctest.Endpoint("oauth-api", up.URL, loopbackNets, oauth(ts.URL)) +
			proctest.Endpoint("oauth-down", up.URL, loopbackNets, oauth(fmt.Sprintf("https://127.0.0.1:%d/token", proctest.ClosedPort(t)))) +
			proctest.Endpoint("mtls-api", mtls.URL, loopbackNets,
				fmt.Sprintf("tls: {client_cert_file: %s, client_key_file: %s, ca_file: %s}", certFile, keyFile, mtlsCA)) +
			proctest.Endpoint("mtls-nocert", mtls.URL, loopbackNets, "tls: {ca_file: "+mtlsCA+"}"))
	return startProxy(t, cfg, envWith("E2E_CLIENT_ID", e2eClientID)), ts, up, keyPEM
}

// TestE2EReplayAfterSecretRotation is the issue's "done" case through the
// running program and the admin API: a callout of an OAuth2 endpoint is
// dead-lettered; the client secret file is rotated and the token server
// accepts only the new secret (revoking the old tokens); once the proxy
// has picked the new file up — no restart — the dead letter replayed with
// POST /admin/v1/dead-letters/{id}/replay reaches the upstream with a token
// minted with the new secret.
func TestE2EReplayAfterSecretRotation(t *testing.T) {
	t.Parallel()
	const newSecret = "e2e-client-SECRET-rotated-9876543210"
	ts := credtest.NewTokenServer(t, e2eClientID, e2eClientSecret)
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		ts.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				return // the probe read below: 200
			}
			w.WriteHeader(int(status.Load()))
		})).ServeHTTP(w, r)
	})
	dir := t.TempDir()
	secretFile := credtest.WriteFile(t, dir, "client-secret", []byte(e2eClientSecret+"\n"))
	cfg := withPolicy(devConfig(proctest.Endpoint("oauth-api", up.URL, loopbackNets, "breaker_failures: 1000",
		fmt.Sprintf("oauth2: {token_url: %q, client_id: {env: E2E_CLIENT_ID}, client_secret: {file: %s}, ca_file: %s}",
			ts.URL, secretFile, ts.CAFile))), "max_attempts: 1")
	p := startProxy(t, cfg, envWith("E2E_CLIENT_ID", e2eClientID))

	resp, body := p.call(t, http.MethodPost, "/callout/oauth-api/v1/charges", strings.NewReader(`{"amount":42}`),
		keyed("rotate-1", true))
	id := statusDoc(t, body).ID
	if resp.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("write = %d %s, want 202", resp.StatusCode, body)
	}
	waitState(t, p, id, "dead_lettered")

	credtest.WriteFile(t, dir, "client-secret", []byte(newSecret+"\n"))
	ts.SetSecrets(newSecret)
	status.Store(http.StatusCreated)
	// The proxy re-reads the file at most once a second: wait until a read
	// through it succeeds, which takes a token minted with the new secret.
	pollUntil(t, 10*time.Second, "the proxy never used the rotated secret", func() bool {
		resp, _ := p.call(t, http.MethodGet, "/callout/oauth-api/v1/ping", nil, nil)
		return resp.StatusCode == http.StatusOK
	})

	replaySucceeds(t, p, id)
	last := lastPost(up)
	tok := strings.TrimPrefix(last.Header.Get("Authorization"), "Bearer ")
	if ts.SecretOf(tok) != newSecret || string(last.Body) != `{"amount":42}` ||
		last.Header.Get("Idempotency-Key") != `"rotate-1"` {
		t.Errorf("the replay reached the upstream with %q (new secret: %v), body %s", last.Header.Get("Idempotency-Key"),
			ts.SecretOf(tok) == newSecret, last.Body)
	}
	for _, n := range []string{e2eClientSecret, newSecret, tok} {
		if strings.Contains(p.logs.String(), n) {
			t.Errorf("logs carry a credential (%.12s…)", n)
		}
	}
}

// lastPost is the last POST the upstream received.
func lastPost(u *proctest.Upstream) proctest.Request {
	var last proctest.Request
	for _, s := range u.Requests("") {
		if s.Method == http.MethodPost {
			last = s
		}
	}
	return last
}

// waitState polls the status document of callout id until its state is
// state, failing the test after 10 s.
func waitState(t *testing.T, p *proxyUnderTest, id, state string) {
	t.Helper()
	pollUntil(t, 10*time.Second, "callout "+id+" never reached state "+state, func() bool {
		_, doc := p.call(t, http.MethodGet, "/v1/callouts/"+id, nil, nil)
		return string(statusDoc(t, doc).State) == state
	})
}

// replaySucceeds replays dead letter id through the admin API (ops token),
// fails the test unless that answers 202 with a replay id, waits until the
// replay has succeeded and returns its id.
func replaySucceeds(t *testing.T, p *proxyUnderTest, id string) string {
	t.Helper()
	var res api.ReplayResultDoc
	resp, body := admin(t, p.AdminURL, http.MethodPost, "/admin/v1/dead-letters/"+id+"/replay", opsToken, nil)
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusAccepted || res.ReplayID == "" {
		t.Fatalf("replay = %d %s, want 202 with a replay id", resp.StatusCode, body)
	}
	waitState(t, p, res.ReplayID, "succeeded")
	return res.ReplayID
}
