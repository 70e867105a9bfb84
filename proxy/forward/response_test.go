package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// responseCase is one upstream answer and what the caller must get.
type responseCase struct {
	name   string
	req    *Request
	answer http.HandlerFunc
	status int
	header http.Header // exact values expected; an empty slice: absent
	body   []byte
}

// responseCases are the answers of TestDoResponse; gz is a gzip body.
func responseCases(gz []byte) []responseCase {
	return []responseCase{
		{
			name: "302 to the metadata service comes back unfollowed",
			req:  get("/r"),
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", "http://169.254.169.254/latest/meta-data/")
				w.WriteHeader(http.StatusFound)
				_, _ = io.WriteString(w, "moved")
			},
			status: http.StatusFound,
			header: http.Header{"Location": {"http://169.254.169.254/latest/meta-data/"}, "Content-Length": {"5"}},
			body:   []byte("moved"),
		},
		{
			name: "307 to Redis comes back unfollowed",
			req:  &Request{Method: http.MethodPost, Path: "/r", Header: http.Header{}, Body: []byte("FLUSHALL\r\n")},
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", "http://127.0.0.1:6379/")
				w.WriteHeader(http.StatusTemporaryRedirect)
			},
			status: http.StatusTemporaryRedirect,
			header: http.Header{"Location": {"http://127.0.0.1:6379/"}, "Content-Length": {"0"}},
		},
		gzipCase("gzip without Accept-Encoding stays gzip, self-consistent", "", gz),
		gzipCase("gzip with Accept-Encoding: gzip", "gzip", gz),
		{
			name: "hop-by-hop response fields removed, chunked body gets a length",
			req:  get("/h"),
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "X-Internal")
				w.Header().Set("X-Internal", "hop")
				w.Header().Set("Keep-Alive", "timeout=5")
				w.Header().Set("Retry-After", "120")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "busy")
				w.(http.Flusher).Flush() // forces chunked encoding
			},
			status: http.StatusServiceUnavailable,
			header: http.Header{"Connection": {}, "X-Internal": {}, "Keep-Alive": {}, "Transfer-Encoding": {},
				"Retry-After": {"120"}, "Content-Length": {"4"}},
			body: []byte("busy"),
		},
		{
			name: "HEAD keeps the upstream's Content-Length",
			req:  &Request{Method: http.MethodHead, Path: "/h", Header: http.Header{}},
			answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "1234")
			},
			status: http.StatusOK,
			header: http.Header{"Content-Length": {"1234"}},
		},
		{
			name:   "204 gets no Content-Length",
			req:    &Request{Method: http.MethodDelete, Path: "/x", Header: http.Header{}},
			answer: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
			status: http.StatusNoContent,
			header: http.Header{"Content-Length": {}},
		},
	}
}

// gzipCase is the gzip body gz answered to a caller whose Accept-Encoding
// is accept ("": none): it comes back as it came, gzip with its own
// length, and the upstream saw the caller's Accept-Encoding.
func gzipCase(name, accept string, gz []byte) responseCase {
	req := get("/gz")
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	return responseCase{name: name, req: req, answer: gzipAnswer(gz), status: http.StatusOK,
		header: http.Header{"Content-Encoding": {"gzip"}, "Content-Length": {fmt.Sprint(len(gz))},
			"X-Seen-Accept-Encoding": {strconv.Quote(accept)}},
		body: gz}
}

func TestDoResponse(t *testing.T) {
	gz := gzipBytes(t, `{"big":"`+strings.Repeat("x", 500)+`"}`)
	f := newForwarder(t, Options{})
	for i, tt := range responseCases(gz) {
		t.Run(tt.name, func(t *testing.T) {
			srv, rc := newBackend(t, tt.answer)
			a := do(f, newEndpoint(t, fmt.Sprintf("resp-%d", i), srv.URL), tt.req)
			if a.Err != nil || a.Response == nil {
				t.Fatalf("attempt = %+v, want a response", a)
			}
			want(t, "status", fmt.Sprint(a.Response.Status), fmt.Sprint(tt.status))
			for k, vs := range tt.header {
				wantValues(t, a.Response.Header, k, vs...)
			}
			if !bytes.Equal(a.Response.Body, tt.body) && len(a.Response.Body)+len(tt.body) > 0 {
				t.Errorf("body = %q, want %q", a.Response.Body, tt.body)
			}
			if n := len(rc.all()); n != 1 {
				t.Errorf("backend saw %d requests, want 1 (a redirect was followed?)", n)
			}
			if c := policy.Classify(a.Response.Status, nil); tt.status/100 == 3 && c.Outcome != policy.Permanent {
				t.Errorf("a redirect classifies as %v, want permanent", c)
			}
		})
	}
}

// TestDoHTTP2 forwards over TLS with HTTP/2 negotiated, where the
// User-Agent suppression and header injection go through another encoder.
func TestDoHTTP2(t *testing.T) {
	rc := &recorder{}
	srv := httptest.NewUnstartedServer(rc.handler(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	f := newForwarder(t, Options{TLSClientConfig: &tls.Config{RootCAs: roots},
		Getenv: env(map[string]string{"UP_AUTH": "Bearer upstream-token"})})
	ep := newEndpoint(t, "h2", srv.URL+"/v2")
	ep.Headers = map[string]config.SecretRef{"Authorization": {Env: "UP_AUTH"}}
	a := do(f, ep, &Request{Method: http.MethodPost, Path: "/x", Body: []byte(apexBody),
		Header: http.Header{"Authorization": {"Bearer caller"}, "Content-Type": {apexCT}}})
	if a.Err != nil || a.Response == nil || string(a.Response.Body) != "ok" {
		t.Fatalf("attempt = %+v", a)
	}
	got := rc.only(t)
	want(t, "proto", fmt.Sprint(got.ProtoMajor), "2")
	want(t, "body", string(got.Body), apexBody)
	wantValues(t, got.Header, "User-Agent")
	wantValues(t, got.Header, "Authorization", "Bearer upstream-token")
	wantValues(t, got.Header, "Content-Type", apexCT)
}

// TestDoLogsNoSecrets checks the debug record: endpoint and status only,
// never a header value or a body.
func TestDoLogsNoSecrets(t *testing.T) {
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "response-body-secret")
	})
	var buf bytes.Buffer
	f := newForwarder(t, Options{
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Getenv: env(map[string]string{"UP_KEY": "injected-secret"}),
	})
	ep := newEndpoint(t, "logged", srv.URL)
	ep.Headers = map[string]config.SecretRef{"X-Api-Key": {Env: "UP_KEY"}}
	a := f.Do(context.Background(), ep, &Request{Method: http.MethodPost, Path: "/x", RawQuery: "api_key=query-secret",
		Header: http.Header{"Authorization": {"Bearer caller-secret"}}, Body: []byte("request-body-secret")})
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	out := buf.String()
	for _, secret := range []string{"injected-secret", "caller-secret", "query-secret", "request-body-secret",
		"response-body-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q: %s", secret, out)
		}
	}
	if !strings.Contains(out, `"endpoint":"logged"`) || !strings.Contains(out, `"status":200`) {
		t.Errorf("log lacks endpoint or status: %s", out)
	}
}
