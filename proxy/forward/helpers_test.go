package forward

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// loopback is the allowed_networks entry every test endpoint needs to reach
// an httptest server.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// newEndpoint returns a loaded-looking endpoint for rawURL that may reach
// loopback, with limits generous enough that only the tests about limits
// ever hit them.
func newEndpoint(t *testing.T, name, rawURL string) *config.Endpoint {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parse %q: %v", rawURL, err)
	}
	return &config.Endpoint{
		Name: name, URL: rawURL, BaseURL: u, Networks: loopback,
		ConnectTimeout: 2 * time.Second, HeaderTimeout: 5 * time.Second, AttemptTimeout: 10 * time.Second,
	}
}

// newForwarder returns a Forwarder whose idle connections are closed when
// the test ends.
func newForwarder(t *testing.T, opts Options) *Forwarder {
	t.Helper()
	f := New(opts)
	t.Cleanup(f.CloseIdleConnections)
	return f
}

// seen is what a backend received.
type seen struct {
	Method     string
	RequestURI string
	Host       string
	ProtoMajor int
	Header     http.Header
	Body       []byte
}

// recorder is an httptest backend that records every request and answers
// with answer.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rc *recorder) all() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

// only returns the only request received, failing the test otherwise.
func (rc *recorder) only(t *testing.T) seen {
	t.Helper()
	all := rc.all()
	if len(all) != 1 {
		t.Fatalf("backend saw %d requests, want 1", len(all))
	}
	return all[0]
}

// handler records each request, then calls answer (nil: an empty 200).
func (rc *recorder) handler(answer http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, seen{
			Method: r.Method, RequestURI: r.RequestURI, Host: r.Host, ProtoMajor: r.ProtoMajor,
			Header: r.Header.Clone(), Body: body,
		})
		rc.mu.Unlock()
		if answer != nil {
			answer(w, r)
		}
	})
}

// newBackend starts an httptest server that records each request and then
// calls answer (which may be nil for an empty 200).
func newBackend(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *recorder) {
	t.Helper()
	rc := &recorder{}
	srv := httptest.NewServer(rc.handler(answer))
	t.Cleanup(func() {
		srv.CloseClientConnections() // releases handlers blocked on their context
		srv.Close()
	})
	return srv, rc
}

// blockUntilDone returns a handler that calls before (if set) and then
// blocks until the request's context is done: the forwarder gave up, or
// the test ended (newBackend's cleanup closes client connections first).
func blockUntilDone(before func(w http.ResponseWriter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if before != nil {
			before(w)
		}
		<-r.Context().Done()
	}
}

// get is a caller request without headers or body.
func get(path string) *Request {
	return &Request{Method: http.MethodGet, Path: path, Header: http.Header{}}
}

// do runs one attempt with a background context.
func do(f *Forwarder, ep *config.Endpoint, req *Request) Attempt {
	return f.Do(context.Background(), ep, req)
}

// gzipBytes returns s gzip-compressed.
func gzipBytes(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gzipAnswer answers with gz as a gzip-encoded JSON body whatever the
// request's Accept-Encoding, which it echoes, quoted, in
// X-Seen-Accept-Encoding.
func gzipAnswer(gz []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Accept-Encoding", strconv.Quote(r.Header.Get("Accept-Encoding")))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(gz)
	}
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// want fails the test when got != wantV.
func want(t *testing.T, what, got, wantV string) {
	t.Helper()
	if got != wantV {
		t.Errorf("%s = %q, want %q", what, got, wantV)
	}
}

// wantValues fails the test unless h's values for key are exactly vs (none
// at all when vs is empty).
func wantValues(t *testing.T, h http.Header, key string, vs ...string) {
	t.Helper()
	got := h.Values(key)
	if len(got) == 0 && len(vs) == 0 {
		return
	}
	if !reflect.DeepEqual(got, vs) {
		t.Errorf("header %s = %q, want %q", key, got, vs)
	}
}
