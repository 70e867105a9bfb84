package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	proxyapp "github.com/calloutproxy/callout-proxy/proxy/app"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
)

// Secrets of the test configuration.
const (
	jwtSecret   = "calloutctl-test-secret-of-32-bytes!!"
	opsToken    = "ops-token-0123456789abcdef"
	viewerToken = "viewer-token-0123456789abcdef"
	testIssuer  = "https://test.my.salesforce.com"
)

// upstream is the recording upstream behind both endpoints; it answers
// 400 (a permanent failure, so an asynchronous callout becomes a dead
// letter) until ok is set.
type upstream struct {
	*proctest.Upstream
	ok atomic.Bool
	// failBody, when set, is the body of the refusals instead of
	// {"error":"card declined"}.
	failBody atomic.Pointer[string]
}

// answer is the upstream's handler.
func (u *upstream) answer(w http.ResponseWriter, _ *http.Request) {
	if u.ok.Load() {
		_, _ = io.WriteString(w, `{"ok":true}`)
		return
	}
	body := `{"error":"card declined"}`
	if b := u.failBody.Load(); b != nil {
		body = *b
	}
	http.Error(w, body, http.StatusBadRequest)
}

// received returns the Idempotency-Key of every request so far, in
// arrival order.
func (u *upstream) received() []string {
	var keys []string
	for _, r := range u.Requests("") {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}
	return keys
}

// proxyEnv is a whole proxy running in-process, wired by the composition
// root's constructor (app.New, as cmd/callout-proxy runs it), on the
// injected clock.
type proxyEnv struct {
	up     *upstream
	clk    *clocktest.Clock
	store  *redisstore.Store
	jobs   *jobs.Store
	logs   *proctest.LogBuffer
	admin  string // base URL of the admin listener
	callee string // base URL of the callout listener
}

// testConfig is the proxy's configuration: pay-api and crm-api on the
// upstream, HS256 callers, tokens ops (write) and viewer (read).
func testConfig(upstreamURL string) string {
	ep := func(name string) string {
		return "  " + name + ":\n    url: " + upstreamURL + "\n    allowed_networks: [127.0.0.0/8]\n"
	}
	return `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth:
  issuers: [` + testIssuer + `]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: JWT_SECRET
admin:
  tokens:
    - {name: ops, token_env: OPS_TOKEN, scope: write}
    - {name: viewer, token_env: VIEWER_TOKEN, scope: read}
endpoints:
` + ep("pay-api") + ep("crm-api")
}

// startProxy runs a proxy until the test ends: app.New over a throwaway
// Redis, every shared clock the test's (the scripts' time pinned to it),
// callers' tokens checked on the wall clock they are minted with.
func startProxy(t *testing.T) *proxyEnv {
	t.Helper()
	env := map[string]string{"JWT_SECRET": jwtSecret, "OPS_TOKEN": opsToken, "VIEWER_TOKEN": viewerToken}
	getenv := func(k string) string { return env[k] }
	p := &proxyEnv{up: &upstream{}, clk: clocktest.New(time.UnixMilli(1_700_000_000_000)), logs: &proctest.LogBuffer{}}
	p.up.Upstream = proctest.NewUpstream(t, p.up.answer)
	cfg, err := config.Parse([]byte(testConfig(p.up.URL)), getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := proxyapp.New(t.Context(), proxyapp.Options{Config: cfg, Getenv: getenv, Logs: p.logs, Redis: testRedis(t),
		SharedClock: func(func() time.Time) func() time.Time { return p.clk.Now }, PinScriptTime: true,
		DispatchIdle: 5 * time.Millisecond, ReplayPollEvery: 20 * time.Millisecond, ReplaySleep: p.clk.Sleep,
		Owner: "replica-1"})
	if err != nil {
		t.Fatal(err)
	}
	p.store, p.jobs, p.admin, p.callee = a.Store(), a.Jobs(), a.AdminURL(), a.URL()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the proxy's Run returned %v", err)
		}
	})
	return p
}

// ctlResult is one calloutctl run.
type ctlResult struct {
	stdout, stderr string
	code           int
}

// ctl runs calloutctl against the proxy with the ops token (unless args
// give --token) and stdin.
func (p *proxyEnv) ctl(t *testing.T, stdin string, args ...string) ctlResult {
	t.Helper()
	return p.ctlWith(t, false, stdin, &proctest.LogBuffer{}, args...)
}

// ctlWith runs calloutctl with stderr going to errw and, when terminal,
// stderr taken for a terminal (the progress bar is drawn).
func (p *proxyEnv) ctlWith(t *testing.T, terminal bool, stdin string, errw *proctest.LogBuffer, args ...string) ctlResult {
	t.Helper()
	env := map[string]string{envServer: p.admin, envToken: opsToken}
	var out proctest.LogBuffer
	a := newApp(func(k string) string { return env[k] }, strings.NewReader(stdin), &out, errw)
	a.pollEvery, a.throttle = 5*time.Millisecond, 0
	a.now = p.clk.Now // relative --since and "in 1m30s" on the proxy's clock
	a.isTerminal = func(any) bool { return terminal }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := a.run(ctx, args)
	if err != nil {
		fmt.Fprintln(errw, "calloutctl:", err)
	}
	return ctlResult{stdout: out.String(), stderr: errw.String(), code: exitCode(err)}
}

// want asserts a run's exit code and that stdout contains each of subs.
func (r ctlResult) want(t *testing.T, code int, subs ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range subs {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("stdout lacks %q:\n%s\nstderr:\n%s", s, r.stdout, r.stderr)
		}
	}
}

// eventually polls cond every 5 ms until it holds, failing after 30 s
// (proctest.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	proctest.Eventually(t, 30*time.Second, 5*time.Millisecond, what, cond)
}
