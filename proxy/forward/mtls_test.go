package forward

import (
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestMTLS: an upstream that requires a client certificate accepts the
// endpoint's configured one (trusting the upstream through tls.ca_file),
// and refuses — Retryable "tls", as any TLS failure — an endpoint that
// presents none or trusts only the system roots.
func TestMTLS(t *testing.T) {
	ca := credtest.NewCA(t, "upstream client CA")
	srv, upstreamCA := credtest.MTLSServer(t, ca)
	certFile, keyFile := ca.IssueFiles(t, t.TempDir(), "proxy-client-1")
	f := newForwarder(t, Options{})
	tests := []struct {
		name   string
		tls    *config.UpstreamTLS
		wantCN string // "" : want a TLS failure
	}{
		{"configured certificate", &config.UpstreamTLS{ClientCertFile: certFile, ClientKeyFile: keyFile, CAFile: upstreamCA}, "proxy-client-1"},
		{"no client certificate", &config.UpstreamTLS{CAFile: upstreamCA}, ""},
		{"certificate, system roots", &config.UpstreamTLS{ClientCertFile: certFile, ClientKeyFile: keyFile}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, "mtls-"+strings.ReplaceAll(tt.name, " ", "-"), srv.URL)
			ep.TLS = tt.tls
			a := do(f, ep, get("/"))
			if tt.wantCN != "" {
				if a.Err != nil || a.Response.Status != http.StatusOK || a.Response.Header.Get(credtest.PeerHeader) != tt.wantCN {
					t.Fatalf("attempt = %+v, err %v; want 200 from %s", a.Response, a.Err, tt.wantCN)
				}
				return
			}
			if a.Response != nil {
				t.Fatalf("attempt = %d, want a TLS failure", a.Response.Status)
			}
			if _, ok := errors.AsType[*problem.Error](a.Err); ok {
				t.Fatalf("Err = %v, a refusal before dispatch; want a TLS failure", a.Err)
			}
			if c := policy.Classify(0, a.Err); c.Outcome != policy.Retryable || c.Reason != policy.ReasonTLS {
				t.Errorf("Classify(%v) = %+v, want retryable tls", a.Err, c)
			}
		})
	}
}

// TestMTLSRotation: a client certificate replaced on disk is presented on
// the next attempt once the re-check interval passed, without a restart; a
// broken replacement keeps the previous certificate and logs one error per
// change; a file missing from the start is a refusal before dispatch.
func TestMTLSRotation(t *testing.T) {
	ca := credtest.NewCA(t, "upstream client CA")
	srv, upstreamCA := credtest.MTLSServer(t, ca)
	dir := t.TempDir()
	c1, k1 := ca.Issue(t, "client-1")
	c2, k2 := ca.Issue(t, "client-2")
	c3, k3 := ca.Issue(t, "client-3")
	certFile := credtest.WriteFile(t, dir, "tls.crt", c1)
	keyFile := credtest.WriteFile(t, dir, "tls.key", k1)
	clock, logs := newFakeClock(), &proctest.LogBuffer{}
	f := newForwarder(t, Options{Now: clock.Now, RecheckInterval: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ep := newEndpoint(t, "mtls-rotate", srv.URL)
	ep.TLS = &config.UpstreamTLS{ClientCertFile: certFile, ClientKeyFile: keyFile, CAFile: upstreamCA}
	steps := []struct {
		name      string
		cert, key []byte // written before the attempt when set
		advance   time.Duration
		wantCN    string
		wantErrs  int // "credential file unusable" log lines so far
	}{
		{"first", nil, nil, 0, "client-1", 0},
		{"rotated, interval not passed", c2, k2, 4 * time.Second, "client-1", 0},
		{"interval passed", nil, nil, time.Second, "client-2", 0},
		{"key not matching", nil, k3, 5 * time.Second, "client-2", 1},
		{"still broken: no new error", nil, nil, 5 * time.Second, "client-2", 1},
		{"cert and key both new", c3, nil, 5 * time.Second, "client-3", 1},
		{"garbage", []byte("not pem"), nil, 5 * time.Second, "client-3", 2},
	}
	for _, st := range steps {
		if st.cert != nil {
			credtest.WriteFile(t, dir, "tls.crt", st.cert)
		}
		if st.key != nil {
			credtest.WriteFile(t, dir, "tls.key", st.key)
		}
		clock.Advance(st.advance)
		a := do(f, ep, get("/"))
		if a.Err != nil || a.Response.Header.Get(credtest.PeerHeader) != st.wantCN {
			t.Fatalf("%s: attempt = %+v, err %v; want client %s", st.name, a.Response, a.Err, st.wantCN)
		}
		if n := logs.Count(`"msg":"credential file unusable; keeping the previous value"`); n != st.wantErrs {
			t.Fatalf("%s: %d error lines, want %d:\n%s", st.name, n, st.wantErrs, logs)
		}
	}
	if !strings.Contains(logs.String(), `"key":"endpoints.mtls-rotate.tls.client_cert_file"`) {
		t.Errorf("logs do not name the key:\n%s", logs)
	}
	assertNoCredentials(t, nil, map[string]string{"logs": logs.String()},
		pemBody(k1), pemBody(k2), pemBody(k3))

	missing := newEndpoint(t, "mtls-missing", srv.URL)
	missing.TLS = &config.UpstreamTLS{ClientCertFile: filepath.Join(dir, "absent.crt"), ClientKeyFile: keyFile}
	a := do(f, missing, get("/"))
	if pe, ok := errors.AsType[*problem.Error](a.Err); !ok || pe.Code != problem.Internal || a.Sent {
		t.Errorf("Err = %v, want problem %s before dispatch", a.Err, problem.Internal)
	}
}

// pemBody returns a distinctive piece of a PEM file's base64 body.
func pemBody(p []byte) string {
	lines := strings.Split(string(p), "\n")
	return lines[1]
}
