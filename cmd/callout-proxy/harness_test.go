package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// testSecret is the HS256 secret of the test configurations.
const testSecret = "test-secret-of-at-least-32-bytes-long!!"

// testIssuer is the org every test token comes from unless a test says otherwise.
const testIssuer = "https://test.my.salesforce.com"

// proxyUnderTest is one run of the whole program on loopback port 0.
type proxyUnderTest struct {
	URL      string // base URL of the callout listener
	AdminURL string // base URL of the admin listener
	config   string // the configuration file's path
	logs     *proctest.LogBuffer
	cancel   context.CancelFunc
	done     chan error

	stopOnce sync.Once
	runErr   error // what run returned, set by stop
}

// stop cancels the run context (as SIGTERM does) and waits up to 30 s for
// run to return; it returns run's error. It may be called more than once:
// later calls return the first result.
func (p *proxyUnderTest) stop() error {
	p.stopOnce.Do(func() {
		p.cancel()
		select {
		case p.runErr = <-p.done:
		case <-time.After(30 * time.Second):
			p.runErr = errors.New("proxy did not stop within 30s")
		}
	})
	return p.runErr
}

// startProxy writes yaml to a config file, runs the program with env as its
// environment and waits until it logs its listening addresses. The program
// is stopped (as by SIGTERM) when the test ends.
func startProxy(t *testing.T, yaml string, env map[string]string) *proxyUnderTest {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	p := &proxyUnderTest{config: path, logs: &proctest.LogBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := run(ctx, []string{"--config", path}, getenv, io.Discard, pw)
		pw.CloseWithError(fmt.Errorf("run returned: %v", err))
		p.done <- err
	}()
	addrs := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "listening" {
				addrs <- [2]string{rec["listen"].(string), rec["admin_listen"].(string)}
			}
		}
	}()
	select {
	case a := <-addrs:
		p.URL, p.AdminURL = "http://"+a[0], "http://"+a[1]
	case err := <-p.done:
		t.Fatalf("proxy exited before listening: %v\nlogs:\n%s", err, p.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("proxy did not start listening; logs:\n%s", p.logs)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("run returned %v", err)
		}
	})
	return p
}

// devConfig is a configuration with HS256 auth, no Redis (embedded) and the
// given endpoints block (already indented by two spaces per level).
func devConfig(endpoints string) string {
	return `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth:
  issuers: [` + testIssuer + `, ` + sandboxIssuer + `]
  audience: callout-proxy
  algorithms: [HS256]
  issuer_keys:
    - {issuer: ` + testIssuer + `, hs256_secret_env: TEST_JWT_SECRET}
    - {issuer: ` + sandboxIssuer + `, hs256_secret_env: TEST_SANDBOX_JWT_SECRET}
admin:
  tokens:
    - {name: ops, token_env: TEST_ADMIN_TOKEN, scope: write}
    - {name: viewer, token_env: TEST_VIEWER_TOKEN, scope: read}
endpoints:
` + endpoints
}

// testEnv is the environment of devConfig.
func testEnv() map[string]string {
	return map[string]string{
		"TEST_JWT_SECRET": testSecret,
		// The second issuer has a secret of its own (auth.issuer_keys).
		"TEST_SANDBOX_JWT_SECRET": proctest.IssuerSecret(testSecret, sandboxIssuer),
		"TEST_ADMIN_TOKEN":        "admin-token-value",
		"TEST_VIEWER_TOKEN":       "viewer-token-value",
	}
}

// bearer returns an Authorization value with a fresh HS256 token for iss.
func bearer(t *testing.T, iss string) string {
	if iss == sandboxIssuer {
		return proctest.Bearer(t, proctest.IssuerSecret(testSecret, iss), iss, 10*time.Minute)
	}
	return proctest.Bearer(t, testSecret, iss, 10*time.Minute)
}

// call sends one request to the proxy with a valid token unless the caller
// set Authorization itself, and returns the response with its body read.
func (p *proxyUnderTest) call(t *testing.T, method, path string, body io.Reader, hdr http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if _, ok := req.Header["Authorization"]; !ok {
		req.Header.Set("Authorization", bearer(t, testIssuer))
	}
	return doRequest(t, req)
}

// noRedirectClient never follows redirects, so tests see what the proxy sent.
var noRedirectClient = proctest.NewClient(60*time.Second, 0)
