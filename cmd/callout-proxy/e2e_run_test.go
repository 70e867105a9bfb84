package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/app"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// get fetches url without a token and returns the response and its body.
func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return doRequest(t, req)
}

// readyBody decodes a /readyz answer.
func readyBody(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("/readyz body %q: %v", b, err)
	}
	return m
}

// metricLine returns the sample line of /metrics text whose name is name
// and which carries every label in labels (`key="value"`), or "".
func metricLine(text, name string, labels ...string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			return line
		}
	}
	return ""
}

// TestE2EHealthAndMetrics: /healthz, /readyz on the callout listener and
// /metrics on the admin listener after a callout (contract §9).
func TestE2EHealthAndMetrics(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("metered", up.URL, loopbackNets)), testEnv())

	resp, body := get(t, p.URL+"/healthz")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, p.URL+"/readyz")
	if m := readyBody(t, body); resp.StatusCode != http.StatusOK || m["redis"] != "ok" || m["status"] != "ready" {
		t.Errorf("/readyz = %d %v, want 200 ready with redis ok", resp.StatusCode, m)
	}
	resp, body = p.call(t, http.MethodGet, "/callout/metered/x", nil, nil)
	wantUpstream(t, resp, body, http.StatusOK, policy.Success)

	resp, body = get(t, p.AdminURL+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics = %d", resp.StatusCode)
	}
	text := string(body)
	ep := `endpoint="metered"`
	if l := metricLine(text, "callout_attempts_total", ep, `outcome="success"`, `kind="first"`); !strings.HasSuffix(l, " 1") {
		t.Errorf("callout_attempts_total line %q, want a count of 1", l)
	}
	if l := metricLine(text, "callout_attempt_duration_seconds_count", ep, `outcome="success"`); !strings.HasSuffix(l, " 1") {
		t.Errorf("callout_attempt_duration_seconds_count line %q, want a count of 1", l)
	}
	if metricLine(text, "callout_attempt_duration_seconds_bucket", ep, `le="+Inf"`) == "" {
		t.Errorf("no callout_attempt_duration_seconds buckets for the endpoint")
	}
	if resp, _ := get(t, p.URL+"/metrics"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the callout listener = %d, want 404 (admin listener only)", resp.StatusCode)
	}
}

// TestE2ERedisDown: with Redis refusing connections or hung, the replica
// stays ready, reads without a key pass through, and writes are refused
// before anything is forwarded (contract §4, §9) — within a second, well inside
// a readiness probe's and an Apex callout's timeout.
func TestE2ERedisDown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"connection refused", func(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", proctest.ClosedPort(t)) }},
		{"hung", silentServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := proctest.NewUpstream(t, okHandler)
			cfg := strings.Replace(devConfig(proctest.Endpoint("ok", up.URL, loopbackNets)), "auth:",
				"redis:\n  url: redis://"+tc.addr(t)+"/0\nauth:", 1)
			p := startProxy(t, cfg, testEnv())
			t.Run("requests", func(t *testing.T) { redisDownRequests(t, p) })
			if n, r := up.Hits(), up.HitsFor("/read"); n != 1 || r != 1 {
				t.Errorf("upstream got %d requests (%d reads), want the one read only", n, r)
			}
		})
	}
}

// redisDownRequests is TestE2ERedisDown's requests, in parallel.
func redisDownRequests(t *testing.T, p *proxyUnderTest) {
	const bound = 3 * time.Second // the store check gives up after 1 s
	t.Run("readyz", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		resp, body := get(t, p.URL+"/readyz")
		if m := readyBody(t, body); resp.StatusCode != http.StatusOK || m["redis"] != "unreachable" {
			t.Errorf("/readyz = %d %v, want 200 reporting redis unreachable", resp.StatusCode, m)
		}
		if d := time.Since(start); d > bound {
			t.Errorf("/readyz took %s", d)
		}
	})
	t.Run("read without key", func(t *testing.T) {
		t.Parallel()
		resp, body := p.call(t, http.MethodGet, "/callout/ok/read", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
	})
	for _, tc := range []struct {
		method string
		hdr    http.Header
	}{
		{http.MethodPut, nil},
		{http.MethodDelete, nil},
		{http.MethodPost, http.Header{"Idempotency-Key": {`"order-42"`}}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			resp, body := p.call(t, tc.method, "/callout/ok/write", strings.NewReader(`{"a":1}`), tc.hdr)
			wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.StoreUnavailable, policy.Rejected)
			if d := time.Since(start); d > bound {
				t.Errorf("the 503 took %s", d)
			}
		})
	}
}

// TestE2ECommandLine: --version, the token subcommand, and a bad
// configuration named by its key (contract §10).
func TestE2ECommandLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("version", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		if err := run(ctx, []string{"--version"}, func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(out.String()); len(f) < 2 || f[0] != "callout-proxy" || f[1] == "" ||
			!strings.Contains(out.String(), "go1.") {
			t.Errorf("--version printed %q, want \"callout-proxy VERSION (…, goN)\"", out.String())
		}
	})
	t.Run("token accepted by the proxy", func(t *testing.T) {
		t.Parallel()
		up := proctest.NewUpstream(t, okHandler)
		cfg := devConfig(proctest.Endpoint("ok", up.URL, loopbackNets))
		env := testEnv()
		var out, errOut bytes.Buffer
		err := run(ctx, []string{"token", "--config", writeConfig(t, cfg)}, func(k string) string { return env[k] },
			&out, &errOut)
		if err != nil {
			t.Fatalf("token: %v (%s)", err, errOut.String())
		}
		tok := strings.TrimSpace(out.String())
		if strings.Count(tok, ".") != 2 {
			t.Fatalf("token printed %q, not a compact JWT", tok)
		}
		p := startProxy(t, cfg, env)
		resp, body := p.call(t, http.MethodGet, "/callout/ok/x", nil, authHeader("Bearer "+tok))
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
	})
	t.Run("bad configuration", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, devConfig(proctest.Endpoint("Bad_Name", "https://api.example.com")))
		env := testEnv()
		err := run(ctx, []string{"--config", path}, func(k string) string { return env[k] }, io.Discard, io.Discard)
		switch {
		case err == nil:
			t.Fatal("run accepted an endpoint named Bad_Name")
		case !strings.Contains(err.Error(), "endpoints.Bad_Name"):
			t.Errorf("error %q does not name the key endpoints.Bad_Name", err)
		case !errors.Is(err, config.ErrInvalid) || exitCode(err) != 2:
			t.Errorf("error %v: want a configuration error with exit code 2, got %d", err, exitCode(err))
		}
	})
}

// TestE2EGracefulShutdown: cancelling run's context (SIGTERM) lets an
// in-flight callout finish, refuses new connections, and run returns nil.
func TestE2EGracefulShutdown(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		okHandler(w, r)
	})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	p := startProxy(t, devConfig(proctest.Endpoint("slow", up.URL, loopbackNets)), testEnv())
	req, err := http.NewRequest(http.MethodGet, p.URL+"/callout/slow/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bearer(t, testIssuer))
	type result struct {
		resp *http.Response
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := noRedirectClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		done <- result{resp, body, err}
	}()
	<-arrived
	p.cancel()
	p.logs.WaitFor(t, `"msg":"draining"`, 10*time.Second)
	waitRefused(t, strings.TrimPrefix(p.URL, "http://"))
	select {
	case err := <-p.done:
		p.done <- err // for stop
		t.Fatalf("run returned %v with a callout in flight", err)
	default:
	}
	released = true
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatalf("in-flight callout failed during shutdown: %v", r.err)
	}
	wantUpstream(t, r.resp, r.body, http.StatusOK, policy.Success)
	if string(r.body) != "upstream ok" {
		t.Errorf("in-flight body = %q", r.body)
	}
	if err := p.stop(); err != nil {
		t.Errorf("run returned %v after a graceful shutdown, want nil", err)
	}
}

// waitRefused waits until addr refuses new TCP connections: the server has
// closed its listener. It polls every 5 ms for at most 10 s.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s still accepts connections while draining", addr)
}

// silentServer accepts TCP connections on loopback and never answers, as a
// hung or black-holed Redis does; it returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestDrainGrace: shutdown waits for the longest attempt limit in force,
// an endpoint's override included, plus 5 s.
func TestDrainGrace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy time.Duration
		eps    []time.Duration
		want   time.Duration
	}{
		{"policy only", 15 * time.Second, nil, 20 * time.Second},
		{"endpoint shorter", 15 * time.Second, []time.Duration{2 * time.Second}, 20 * time.Second},
		{"endpoint longer", 15 * time.Second, []time.Duration{2 * time.Second, 90 * time.Second}, 95 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Policy.AttemptTimeout = tt.policy
			cfg.Endpoints = map[string]*config.Endpoint{"nil-entry": nil}
			for i, d := range tt.eps {
				cfg.Endpoints[fmt.Sprint("ep-", i)] = &config.Endpoint{AttemptTimeout: d}
			}
			if got := app.DrainGrace(cfg); got != tt.want {
				t.Errorf("DrainGrace = %s, want %s", got, tt.want)
			}
		})
	}
}
