package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// reload sends POST /admin/v1/reload with token and returns the answer.
func (p *proxyUnderTest) reload(t *testing.T, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.AdminURL+"/admin/v1/reload", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return doRequest(t, req)
}

// healthzConfig is the config fingerprint /healthz reports.
func (p *proxyUnderTest) healthzConfig(t *testing.T) string {
	t.Helper()
	_, body := get(t, p.URL+"/healthz")
	var h struct{ Config string }
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("/healthz %s: %v", body, err)
	}
	return h.Config
}

// rewrite replaces the proxy's configuration file with yaml and returns
// its fingerprint.
func (p *proxyUnderTest) rewrite(t *testing.T, yaml string) string {
	t.Helper()
	if err := os.WriteFile(p.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Fingerprint([]byte(yaml))
}

// TestE2EReload: POST /admin/v1/reload (scope write) puts a new endpoint,
// an upstream credential, a per-request limit and a policy size in force
// without a restart, keeping the store (a callout
// recorded before is still there) and the request in flight (it finishes
// with the upstream's answer); a file with problems, a change only a
// restart applies and a read-scope token are refused with nothing
// changed, and each refusal says why.
func TestE2EReload(t *testing.T) {
	t.Parallel()
	release, arrived := make(chan struct{}), make(chan struct{}, 1)
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	slow := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		okHandler(w, r)
	})
	first := devConfig(proctest.Endpoint("pay-api", slow.URL, loopbackNets, "headers: {X-Key: {env: KEY_A}}"))
	p := startProxy(t, first, envWith("KEY_A", "value-a", "KEY_B", "value-b"))
	t.Cleanup(free) // before the proxy stops: a failure must not leave the upstream's handler waiting
	before := p.healthzConfig(t)
	if before != config.Fingerprint([]byte(first)) {
		t.Fatalf("/healthz config %q, want the file's %q", before, config.Fingerprint([]byte(first)))
	}
	// A keyed write recorded before the reload, and one in flight across it.
	resp, body := p.call(t, "POST", "/callout/pay-api/charges", strings.NewReader(`{}`), http.Header{"Idempotency-Key": {"before-1"}})
	wantUpstream(t, resp, body, 200, policy.Success)
	recorded := resp.Header.Get("Callout-Id")
	inflight := make(chan *http.Response, 1)
	go func() {
		r, _ := p.call(t, "GET", "/callout/pay-api/slow", nil, nil)
		inflight <- r
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow request did not reach the upstream")
	}

	// The new file: an endpoint more, pay-api's credential from another
	// variable, a per-request limit and a policy size lowered.
	endpoints := proctest.Endpoint("pay-api", slow.URL, loopbackNets, "headers: {X-Key: {env: KEY_B}}") +
		proctest.Endpoint("crm-api", slow.URL, loopbackNets)
	second := withPolicy(devConfig(endpoints)+"limits:\n  max_header_fields: 20\n", "max_request_bytes: 64")
	want := p.rewrite(t, second)
	resp, body = p.reload(t, "admin-token-value")
	var doc api.ReloadDoc
	if resp.StatusCode != 200 || json.Unmarshal(body, &doc) != nil || doc.Config != want || doc.Status != "reloaded" {
		t.Fatalf("reload: %d %s, want 200 with config %q", resp.StatusCode, body, want)
	}
	if got := p.healthzConfig(t); got != want {
		t.Fatalf("/healthz config %q after the reload, want %q", got, want)
	}
	resp, body = p.call(t, "GET", "/callout/crm-api/status", nil, nil)
	wantUpstream(t, resp, body, 200, policy.Success)
	resp, body = p.call(t, "GET", "/callout/pay-api/pay-status", nil, nil)
	wantUpstream(t, resp, body, 200, policy.Success)
	if a, b := slow.Request(t, "/charges").Header.Get("X-Key"), slow.Request(t, "/pay-status").Header.Get("X-Key"); a != "value-a" || b != "value-b" {
		t.Fatalf("X-Key before the reload %q, after %q; want value-a, value-b", a, b)
	}
	resp, body = p.call(t, "POST", "/callout/pay-api/charges", strings.NewReader(strings.Repeat("x", 65)),
		http.Header{"Idempotency-Key": {"after-1"}})
	wantProblem(t, resp, body, 413, problem.BodyTooLarge, policy.Rejected)
	many := http.Header{}
	for i := range 20 {
		many.Set("X-Field-"+strconv.Itoa(i), "v")
	}
	resp, body = p.call(t, "GET", "/callout/pay-api/status", nil, many)
	wantProblem(t, resp, body, 431, problem.HeadersTooLarge, policy.Rejected)
	free()
	if r := <-inflight; r.StatusCode != 200 {
		t.Fatalf("the request in flight across the reload answered %d", r.StatusCode)
	}
	req, err := http.NewRequest("GET", p.AdminURL+"/admin/v1/callouts/"+recorded, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer viewer-token-value")
	if resp, body = doRequest(t, req); resp.StatusCode != 200 || !strings.Contains(string(body), recorded) {
		t.Fatalf("the callout recorded before the reload: %d %s", resp.StatusCode, body)
	}
	if recs := p.logs.Records("configuration reloaded"); len(recs) != 1 ||
		!strings.Contains(strings.Join(anyStrings(recs[0]["endpoints_added"]), ","), "crm-api") {
		t.Fatalf("log lines of the reload: %v", recs)
	}

	// A file with problems: every one named with its line; nothing changes.
	p.rewrite(t, withPolicy(devConfig(endpoints+"  bad-one:\n    url: https://x.example.com\n    attempt_timeout: 5\n"+
		"  Bad_Name:\n    url: https://y.example.com\n"), "max_request_bytes: 64"))
	resp, body = p.reload(t, "admin-token-value")
	pb := wantProblem(t, resp, body, 422, problem.ReloadRejected, policy.Rejected)
	for _, s := range []string{"unchanged", "endpoints.bad-one.attempt_timeout", "has no unit", "endpoints.Bad_Name"} {
		if !strings.Contains(pb.Detail, s) {
			t.Errorf("the refusal's detail lacks %q:\n%s", s, pb.Detail)
		}
	}
	if got := p.healthzConfig(t); got != want {
		t.Fatalf("a rejected reload changed the configuration: %q, want %q", got, want)
	}
	resp, body = p.call(t, "GET", "/callout/crm-api/status", nil, nil)
	wantUpstream(t, resp, body, 200, policy.Success)

	// A change only a restart applies: refused, naming the key.
	p.rewrite(t, strings.Replace(second, "admin_listen: 127.0.0.1:0", "admin_listen: 127.0.0.1:1", 1))
	resp, body = p.reload(t, "admin-token-value")
	pb = wantProblem(t, resp, body, 422, problem.ReloadRejected, policy.Rejected)
	if !strings.Contains(pb.Detail, "admin_listen") || !strings.Contains(pb.Detail, "restart") {
		t.Errorf("the refusal of a restart-only change: %s", pb.Detail)
	}
	// Both at once: one rejection names the file's problem and the
	// restart-only key; a restart-only key with a problem of its own
	// (listen) is named once, as a problem.
	both := strings.NewReplacer("admin_listen: 127.0.0.1:0", "admin_listen: 127.0.0.1:1",
		"\nlisten: 127.0.0.1:0", "\nlisten: not-an-address",
		"endpoints:\n", "endpoints:\n  late-api:\n    url: https://z.example.com\n    attempt_timeout: 5\n")
	p.rewrite(t, both.Replace("\n" + second)[1:])
	resp, body = p.reload(t, "admin-token-value")
	pb = wantProblem(t, resp, body, 422, problem.ReloadRejected, policy.Rejected)
	for _, s := range []string{"endpoints.late-api.attempt_timeout", `:1: listen: "not-an-address"`,
		"applied only by a restart: admin_listen"} {
		if !strings.Contains(pb.Detail, s) {
			t.Errorf("the one-pass refusal lacks %q:\n%s", s, pb.Detail)
		}
	}
	if strings.Contains(pb.Detail, "restart: admin_listen, listen") || strings.Contains(pb.Detail, "restart: listen") {
		t.Errorf("listen, a problem, is named as a restart-only change too:\n%s", pb.Detail)
	}
	// A read-scope token may not reload.
	resp, body = p.reload(t, "viewer-token-value")
	wantProblem(t, resp, body, 403, problem.Forbidden, policy.Rejected)
	if !p.logs.HasAudit(map[string]string{"action": "reload", "result": "reload_rejected", "token": "ops"}) ||
		!p.logs.HasAudit(map[string]string{"action": "reload", "result": "ok", "token": "ops"}) {
		t.Errorf("the reloads are not audit-logged:\n%s", p.logs)
	}
}

// anyStrings is a decoded JSON list of strings.
func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestE2EReloadOnSIGHUP: the binary reloads its file on SIGHUP: a new
// endpoint serves at once; a file with a problem is refused with a log
// line saying why, and the process keeps serving the configuration in
// force. It builds and runs the binary: a multi-process test, run with the
// real-Redis suite (proctest.SkipOnEmbeddedStore).
func TestE2EReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	proctest.SkipOnEmbeddedStore(t)
	bin, err := proctest.BuildBinary(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	up := proctest.NewUpstream(t, okHandler)
	port, adminPort := proctest.FreePort(t), proctest.FreePort(t)
	base := strings.NewReplacer("listen: 127.0.0.1:0", "listen: 127.0.0.1:"+strconv.Itoa(port),
		"admin_listen: 127.0.0.1:0", "admin_listen: 127.0.0.1:"+strconv.Itoa(adminPort))
	first := base.Replace(devConfig(proctest.Endpoint("pay-api", up.URL, loopbackNets)))
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs proctest.LogBuffer
	cmd := exec.Command(bin, "--config", path)
	cmd.Env = proctest.EnvList(testEnv())
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	logs.WaitFor(t, `"msg":"listening"`, proctest.StartupTimeout)
	p := &proxyUnderTest{URL: "http://127.0.0.1:" + strconv.Itoa(port), logs: &logs}

	second := base.Replace(devConfig(proctest.Endpoint("pay-api", up.URL, loopbackNets) +
		proctest.Endpoint("crm-api", up.URL, loopbackNets)))
	if err := os.WriteFile(path, []byte(second), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.WaitFor(t, `"msg":"configuration reloaded"`, 30*time.Second)
	resp, body := p.call(t, "GET", "/callout/crm-api/status", nil, nil)
	wantUpstream(t, resp, body, 200, policy.Success)

	if err := os.WriteFile(path, []byte(second+"  broken:\n    url: ftp://x.example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.WaitFor(t, `"msg":"reload rejected"`, 30*time.Second)
	rec := logs.Records("reload rejected")[0]
	if rec["level"] != "ERROR" || !strings.Contains(rec["reason"].(string), "endpoints.broken.url") {
		t.Fatalf("the rejection's log line: %v", rec)
	}
	resp, body = p.call(t, "GET", "/callout/crm-api/status", nil, nil)
	wantUpstream(t, resp, body, 200, policy.Success)
}

// TestE2EValidateOnePass: validate names every problem of a file in one
// run — a wrong kind, a duration without a unit and a bad endpoint name
// together — each with its line.
func TestE2EValidateOnePass(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, withPolicy(devConfig(proctest.Endpoint("Bad_Name", "https://api.example.com")),
		"max_attempts: many", "attempt_timeout: 5"))
	var out bytes.Buffer
	err := run(context.Background(), []string{"validate", "--config", path}, func(k string) string { return testEnv()[k] },
		&out, io.Discard)
	if exitCode(err) != 2 {
		t.Fatalf("validate: %v (exit %d)", err, exitCode(err))
	}
	for _, s := range []string{"policy.max_attempts: must be a whole number", "policy.attempt_timeout: 5 has no unit",
		"endpoints.Bad_Name"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("validate's one run lacks %q:\n%v", s, err)
		}
	}
}
