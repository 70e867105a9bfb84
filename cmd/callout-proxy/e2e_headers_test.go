package main

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// Values of the endpoint-injected headers in TestE2EHeaders.
const (
	upstreamAuth = "Bearer upstream-secret"
	upstreamKey  = "upstream-key"
)

// rawHead is a request line, a Host field and lines, each ended by CRLF,
// for proxyUnderTest.raw.
func rawHead(method, target string, lines ...string) string {
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: proxy.test\r\n")
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	return b.String()
}

// TestE2EHeaders: hop-by-hop and caller-only fields never reach the
// upstream, and injected fields can be neither removed nor overridden
// (contract §4, §9, §10 `headers`; RFC 9110 §7.6.1).
func TestE2EHeaders(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(
		proctest.Endpoint("plain", up.URL, loopbackNets)+
			proctest.Endpoint("inject", up.URL, loopbackNets,
				"headers: {Authorization: {env: UP_AUTH}, X-Api-Key: {env: UP_KEY}}")),
		envWith("UP_AUTH", upstreamAuth, "UP_KEY", upstreamKey))
	token := "Authorization: " + bearer(t, testIssuer)

	tests := []struct {
		name   string
		target string   // below /callout; also what the upstream sees below its root
		lines  []string // header fields besides Host and Authorization
		absent []string // fields the upstream must not get
		want   map[string][]string
	}{
		{name: "empty Connection beside Connection: X-Api-Key", target: "/plain/h/conn-empty",
			lines:  []string{"Connection:", "Connection: X-Api-Key", "X-Api-Key: caller-key", "X-Keep: kept"},
			absent: []string{"Connection", "X-Api-Key"}, want: map[string][]string{"X-Keep": {"kept"}}},
		{name: "Connection: Authorization cannot strip the injected one", target: "/inject/h/conn-auth",
			lines:  []string{"Connection: Authorization, X-Api-Key"},
			absent: []string{"Connection"},
			want:   map[string][]string{"Authorization": {upstreamAuth}, "X-Api-Key": {upstreamKey}}},
		{name: "Upgrade: h2c with HTTP2-Settings", target: "/plain/h/h2c",
			lines: []string{"Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c",
				"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"},
			absent: []string{"Connection", "Upgrade", "Http2-Settings"}},
		{name: "TE: trailers", target: "/plain/h/te", lines: []string{"TE: trailers"}, absent: []string{"Te"}},
		{name: "Proxy-Authorization", target: "/plain/h/proxy-auth",
			lines: []string{"Proxy-Authorization: Basic cHJveHk6c2VjcmV0"}, absent: []string{"Proxy-Authorization"}},
		{name: "caller Authorization and Cookie", target: "/plain/h/creds",
			lines:  []string{"Cookie: sid=00D000000000001!AQ4AQ", "X-Keep: kept"},
			absent: []string{"Authorization", "Cookie"}, want: map[string][]string{"X-Keep": {"kept"}}},
		{name: "caller cannot override injected fields", target: "/inject/h/override",
			lines: []string{"X-Api-Key: caller-key", "x-api-key: caller-key-2", "X-API-KEY: caller-key-3"},
			want:  map[string][]string{"Authorization": {upstreamAuth}, "X-Api-Key": {upstreamKey}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lines := append([]string{token}, tt.lines...)
			resp, body := p.raw(t, rawHead(http.MethodGet, "/callout"+tt.target, lines...), nil)
			wantUpstream(t, resp, body, http.StatusOK, policy.Success)
			_, below, _ := strings.Cut(strings.TrimPrefix(tt.target, "/"), "/")
			seen := up.Request(t, "/"+below)
			for _, k := range tt.absent {
				if v, ok := seen.Header[k]; ok {
					t.Errorf("upstream got %s: %q", k, v)
				}
			}
			if v, ok := seen.Header["Authorization"]; ok && tt.want["Authorization"] == nil {
				t.Errorf("upstream got the caller's Authorization %q", v)
			}
			for k, want := range tt.want {
				if got := seen.Header[k]; !slices.Equal(got, want) {
					t.Errorf("upstream %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// apexHeader is what an Apex HttpRequest sends when the code sets only a
// Content-Type (contract §2: Apex sends a browser-like Accept).
func apexHeader() http.Header {
	return http.Header{
		"User-Agent":       {"SFDC-Callout/68.0"},
		"Accept":           {"text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2"},
		"SFDC_STACK_DEPTH": {"1"},
		"Content-Type":     {"application/x-www-form-urlencoded"},
	}
}

// TestE2EApexDefaults: Apex's default headers and a mislabelled JSON body
// reach the upstream byte for byte, and the proxy's own errors are
// problem+json whatever Accept says (contract §2).
func TestE2EApexDefaults(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, withPolicy(devConfig(proctest.Endpoint("apex", up.URL, loopbackNets)),
		"max_request_bytes: 1024"), testEnv())
	payload := []byte(`{"amount":1250,"currency":"EUR","note":"a=b&c=d"}`)

	t.Run("forwarded as sent", func(t *testing.T) {
		t.Parallel()
		resp, body := p.call(t, http.MethodPut, "/callout/apex/v1/charges/42", bytes.NewReader(payload), apexHeader())
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		seen := up.Request(t, "/v1/charges/42")
		if !bytes.Equal(seen.Body, payload) {
			t.Errorf("upstream body = %q, want %q", seen.Body, payload)
		}
		for k, want := range apexHeader() {
			if got := seen.Header.Values(k); !slices.Equal(got, want) {
				t.Errorf("upstream %s = %q, want %q", k, got, want)
			}
		}
		if seen.Method != http.MethodPut {
			t.Errorf("upstream method = %s, want PUT", seen.Method)
		}
	})
	errs := []struct {
		name   string
		path   string
		hdr    http.Header
		body   []byte
		status int
		code   problem.Code
	}{
		{"unknown endpoint", "/callout/nope/x", nil, nil, 404, problem.UnknownEndpoint},
		{"no token", "/callout/apex/x", http.Header{"Authorization": nil}, nil, 401, problem.Unauthorized},
		{"body too large", "/callout/apex/x", nil, bytes.Repeat([]byte("a"), 2048), 413, problem.BodyTooLarge},
	}
	for _, tt := range errs {
		t.Run("problem+json: "+tt.name, func(t *testing.T) {
			t.Parallel()
			hdr := apexHeader()
			for k, v := range tt.hdr {
				hdr[k] = v
			}
			resp, body := p.call(t, http.MethodPut, tt.path, bytes.NewReader(tt.body), hdr)
			wantProblem(t, resp, body, tt.status, tt.code, policy.Rejected)
		})
	}
}

// gzipped returns b compressed with gzip.
func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestE2EGzipPassThrough: a gzip response reaches the caller
// self-consistent, Content-Encoding kept and Content-Length equal to the
// bytes sent, whatever the caller's Accept-Encoding (the proxy neither
// decodes nor re-encodes).
func TestE2EGzipPassThrough(t *testing.T) {
	t.Parallel()
	original := bytes.Repeat([]byte(`{"status":"accepted","id":"ch_123"}`+"\n"), 200)
	zipped := gzipped(t, original)
	gz := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.(http.Flusher).Flush() // headers out first: chunked, no Content-Length from the upstream
		_, _ = w.Write(zipped)
	})
	p := startProxy(t, devConfig(proctest.Endpoint("gz", gz.URL, loopbackNets)), testEnv())
	for _, ae := range []string{"gzip", ""} {
		t.Run("Accept-Encoding "+strconv.Quote(ae), func(t *testing.T) {
			t.Parallel()
			path := "/ae-" + ae
			hdr := http.Header{}
			if ae != "" {
				hdr.Set("Accept-Encoding", ae)
			}
			resp, body := p.call(t, http.MethodGet, "/callout/gz"+path, nil, hdr)
			wantUpstream(t, resp, body, http.StatusOK, policy.Success)
			if ce := resp.Header.Get("Content-Encoding"); ce != "gzip" {
				t.Errorf("Content-Encoding = %q, want gzip", ce)
			}
			if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length = %q, but %d bytes arrived", cl, len(body))
			}
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("body is not gzip: %v", err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(plain, original) {
				t.Errorf("gunzipped body differs from the original (err %v, %d bytes)", err, len(plain))
			}
			if got := gz.Request(t, path).Header.Get("Accept-Encoding"); got != ae {
				t.Errorf("upstream Accept-Encoding = %q, want the caller's %q", got, ae)
			}
		})
	}
}

// TestE2EResponseHeaders: a response without Content-Type gets none
// invented for it, and the proxy's own fields (Callout-Id, ...) are never
// taken from the upstream (contract §2).
func TestE2EResponseHeaders(t *testing.T) {
	t.Parallel()
	bare := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = nil // send none, and stop net/http sniffing one
		w.Header().Set("X-Upstream", "bare")
		_, _ = io.WriteString(w, "<html><body>no type</body></html>")
	})
	forger := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Callout-Outcome", "success")
		h.Set("Callout-Id", "forged-id")
		h.Set("Callout-Record", "unrecorded")
		h.Set("Idempotent-Replayed", "true")
		h.Set("X-Upstream", "forger")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	p := startProxy(t, devConfig(proctest.Endpoint("bare", bare.URL, loopbackNets)+
		proctest.Endpoint("forger", forger.URL, loopbackNets)), testEnv())
	t.Run("no Content-Type stays none", func(t *testing.T) {
		t.Parallel()
		resp, body := p.call(t, http.MethodGet, "/callout/bare/x", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if ct, ok := resp.Header["Content-Type"]; ok {
			t.Errorf("Content-Type = %q, but the upstream sent none", ct)
		}
		if resp.Header.Get("X-Upstream") != "bare" || string(body) != "<html><body>no type</body></html>" {
			t.Errorf("response not passed through: %v %q", resp.Header, body)
		}
	})
	t.Run("the proxy's own fields are not the upstream's", func(t *testing.T) {
		t.Parallel()
		resp, body := p.call(t, http.MethodGet, "/callout/forger/x", nil, nil)
		wantUpstream(t, resp, body, http.StatusServiceUnavailable, policy.Retryable)
		for _, k := range []string{"Callout-Id", "Callout-Record", "Idempotent-Replayed"} {
			if v, ok := resp.Header[k]; ok {
				t.Errorf("%s = %q came from the upstream", k, v)
			}
		}
		if got := resp.Header.Values("Callout-Outcome"); len(got) != 1 {
			t.Errorf("Callout-Outcome = %q, want the proxy's one value", got)
		}
		if resp.Header.Get("X-Upstream") != "forger" {
			t.Errorf("the upstream's own fields were not passed through")
		}
	})
}

// randomUUID is a version 4 UUID in the shape of Apex's (and Java's)
// UUID.randomUUID().toString(): lower-case hex, 8-4-4-4-12.
func randomUUID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// TestE2EBareIdempotencyKeys: a write with the key Apex code writes
// (`req.setHeader('Idempotency-Key', UUID.randomUUID().toString())`) is
// accepted whatever its first character (contract §5); the same key sent quoted
// is the same key, so it replays; a key of 256 characters and two fields
// are refused before the upstream is called.
func TestE2EBareIdempotencyKeys(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("api", up.URL, loopbackNets)), testEnv())

	keys := []string{"0" + randomUUID(t)[1:], strings.ToUpper("9" + randomUUID(t)[1:]), "a" + randomUUID(t)[1:]}
	for i, key := range keys {
		path := fmt.Sprintf("/callout/api/charges/%d", i)
		resp, body := p.call(t, http.MethodPost, path, strings.NewReader(`{"n":1}`),
			http.Header{"Idempotency-Key": {key}})
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if got := up.Request(t, fmt.Sprintf("/charges/%d", i)).Header.Get("Idempotency-Key"); got != key {
			t.Errorf("upstream got Idempotency-Key %q, want %q unchanged", got, key)
		}
		resp, body = p.call(t, http.MethodPost, path, strings.NewReader(`{"n":1}`),
			http.Header{"Idempotency-Key": {`"` + key + `"`}})
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("key %s sent quoted was not a replay of the bare one", key)
		}
		if n := up.HitsFor(fmt.Sprintf("/charges/%d", i)); n != 1 {
			t.Errorf("upstream called %d times for one key, want 1", n)
		}
	}
	for _, tt := range []struct {
		name   string
		values []string
	}{
		{"256 characters", []string{strings.Repeat("7", 256)}},
		{"two fields", []string{randomUUID(t), randomUUID(t)}},
		{"a list", []string{randomUUID(t) + ", " + randomUUID(t)}},
	} {
		resp, body := p.call(t, http.MethodPost, "/callout/api/refused", strings.NewReader(`{}`),
			http.Header{"Idempotency-Key": tt.values})
		wantProblem(t, resp, body, http.StatusBadRequest, problem.IdempotencyKeyInvalid, policy.Rejected)
	}
	if n := up.HitsFor("/refused"); n != 0 {
		t.Errorf("refused keys reached the upstream %d times", n)
	}
}
