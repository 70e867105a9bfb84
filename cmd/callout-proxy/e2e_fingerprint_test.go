package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestHealthcheckFingerprint: `healthcheck --config FILE` passes against
// the proxy running FILE, and fails (exit 1) against another program
// answering a healthy-looking /healthz on FILE's port, and against a
// proxy running another configuration on it.
func TestHealthcheckFingerprint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := func(k string) string { return testEnv()[k] }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	yaml := strings.Replace(devConfig(proctest.Endpoint("pay-api", "https://api.example.com")),
		"listen: 127.0.0.1:0\n", "listen: "+addr+"\n", 1)
	path := writeConfig(t, yaml)

	// A foreign process on the port, answering as a proxy's /healthz would.
	foreign := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok","version":"v1.0.0","go_version":"go1.26"}`)
	})}
	go func() { _ = foreign.Serve(l) }()
	err = run(ctx, []string{"healthcheck", "--config", path}, env, io.Discard, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "another proxy holds this port") {
		t.Fatalf("against a foreign process: %v", err)
	}
	_ = foreign.Close()

	// This configuration's proxy: ok, naming the fingerprint.
	p := startProxy(t, yaml, testEnv())
	var out bytes.Buffer
	if err := run(ctx, []string{"healthcheck", "--config", path}, env, &out, io.Discard); err != nil {
		t.Fatalf("against its own proxy: %v\nlogs:\n%s", err, p.logs)
	}
	if !strings.Contains(out.String(), "configuration ") {
		t.Fatalf("healthcheck printed %q", out.String())
	}
	// Another configuration of the same address: not this proxy's.
	other := writeConfig(t, yaml+"  crm-api:\n    url: https://crm.example.com\n")
	err = run(ctx, []string{"healthcheck", "--config", other}, env, io.Discard, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "configuration fingerprint") {
		t.Fatalf("against a proxy of another configuration: %v", err)
	}
}
