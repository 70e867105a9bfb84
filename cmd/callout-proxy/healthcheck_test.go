package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestHealthzOf: a --url without a path (or with "/") means its /healthz;
// any other path is kept; what is not an http(s) URL is refused.
func TestHealthzOf(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1:9280":          "http://127.0.0.1:9280/healthz",
		"http://127.0.0.1:9280/":         "http://127.0.0.1:9280/healthz",
		"https://proxy.internal":         "https://proxy.internal/healthz",
		"http://127.0.0.1:9280/healthz":  "http://127.0.0.1:9280/healthz",
		"http://127.0.0.1:9280/readyz":   "http://127.0.0.1:9280/readyz",
		"http://127.0.0.1:9280/?probe=1": "http://127.0.0.1:9280/healthz?probe=1",
	} {
		if got, err := healthzOf(raw); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"127.0.0.1:9280", "ftp://host/", "http:///healthz", "://"} {
		if got, err := healthzOf(raw); err == nil {
			t.Errorf("%s: %q, want an error", raw, got)
		}
	}
}

// TestHealthURL: the configured listener on this host, loopback for an
// unspecified address, https with TLS.
func TestHealthURL(t *testing.T) {
	for _, c := range []struct {
		listen string
		tls    bool
		want   string
	}{
		{"0.0.0.0:8080", false, "http://127.0.0.1:8080/healthz"},
		{":9000", false, "http://127.0.0.1:9000/healthz"},
		{"[::]:8080", false, "http://127.0.0.1:8080/healthz"},
		{"10.1.2.3:8080", false, "http://10.1.2.3:8080/healthz"},
		{"127.0.0.1:8443", true, "https://127.0.0.1:8443/healthz"},
	} {
		cfg := &config.Config{Listen: c.listen}
		if c.tls {
			cfg.TLSCertFile = "cert.pem"
		}
		if got, err := healthURL(cfg); err != nil || got != c.want {
			t.Errorf("%s (tls %v): %q, %v; want %q", c.listen, c.tls, got, err, c.want)
		}
	}
}

// TestHealthcheckURLAndConfig: `healthcheck --url` with no path checks
// the listener's /healthz; with --config too it compares FILE's
// fingerprint as --config alone does: another program answering a
// healthy-looking /healthz at the URL, or a proxy of another
// configuration, fails it (exit 1).
func TestHealthcheckURLAndConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := func(k string) string { return testEnv()[k] }
	foreign := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok","version":"v1.0.0","go_version":"go1.26"}`)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = foreign.Serve(l) }()
	t.Cleanup(func() { _ = foreign.Close() })
	yaml := devConfig(proctest.Endpoint("pay-api", "https://api.example.com"))
	path := writeConfig(t, yaml)
	err = run(ctx, []string{"healthcheck", "--url", "http://" + l.Addr().String(), "--config", path}, env, io.Discard, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "another proxy holds this port") {
		t.Fatalf("--url and --config against a foreign process: %v", err)
	}

	p := startProxy(t, yaml, testEnv())
	for _, u := range []string{p.URL, p.URL + "/"} {
		var out bytes.Buffer
		if err := run(ctx, []string{"healthcheck", "--url", u}, env, &out, io.Discard); err != nil {
			t.Fatalf("--url %s: %v", u, err)
		}
		if !strings.Contains(out.String(), "ok: "+p.URL+"/healthz answers") {
			t.Errorf("--url %s printed %q", u, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"healthcheck", "--config", path, "--url", p.URL}, env, &out, io.Discard); err != nil {
		t.Fatalf("--url and --config against its own proxy: %v\nlogs:\n%s", err, p.logs)
	}
	if !strings.Contains(out.String(), "configuration ") {
		t.Errorf("healthcheck printed %q", out.String())
	}
	other := writeConfig(t, yaml+"  crm-api:\n    url: https://crm.example.com\n")
	err = run(ctx, []string{"healthcheck", "--config", other, "--url", p.URL}, env, io.Discard, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "configuration fingerprint") {
		t.Fatalf("--url and another configuration: %v", err)
	}
	err = run(ctx, []string{"healthcheck", "--url", "127.0.0.1:1"}, env, io.Discard, io.Discard)
	if exitCode(err) != 2 {
		t.Fatalf("--url without a scheme: %v, want a usage error", err)
	}
}
