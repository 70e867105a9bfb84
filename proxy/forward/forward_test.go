package forward

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// Apex's defaults for an HttpRequest (SFDC-Callout/68.0): the browser-like
// Accept, the stack-depth header with an underscore, and a JSON body that
// Apex labels as a form unless the code sets Content-Type.
const (
	apexUA     = "SFDC-Callout/68.0"
	apexAccept = "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2"
	apexCT     = "application/x-www-form-urlencoded"
	apexBody   = `{"amount":1200,"currency":"EUR","note":"a=b&c"}`
)

// forwardCase is one request forwarded and what the upstream must see.
type forwardCase struct {
	name     string
	req      *Request
	injected map[string]config.SecretRef
	header   http.Header                // exact values the upstream must see; an empty slice: absent
	check    func(t *testing.T, s seen) // what else it must see; nil: nothing
}

// forwardCases are the requests of TestDoForwardsRequest; injected values
// come from the environment of forwardEnv.
func forwardCases() []forwardCase {
	return []forwardCase{
		{
			name: "method, path, query and body byte for byte",
			req: &Request{Method: http.MethodPost, Path: "/v1/charges/ch%20x/caf%C3%A9", RawQuery: "a=1&b=%2F&c",
				Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {`"k-1"`}},
				Body:   []byte(`{"a":1}`)},
			header: http.Header{"Content-Length": {"7"}, "Idempotency-Key": {`"k-1"`}, "Transfer-Encoding": {}},
			check: func(t *testing.T, s seen) {
				want(t, "method", s.Method, "POST")
				want(t, "request URI", s.RequestURI, "/base/v1/charges/ch%20x/caf%C3%A9?a=1&b=%2F&c")
				want(t, "body", string(s.Body), `{"a":1}`)
			},
		},
		{
			name: "Apex defaults arrive byte for byte",
			req: &Request{Method: http.MethodPost, Path: "/v1/charges", Body: []byte(apexBody), Header: http.Header{
				"User-Agent": {apexUA}, "Accept": {apexAccept}, "SFDC_STACK_DEPTH": {"1"}, "Content-Type": {apexCT},
			}},
			header: http.Header{"User-Agent": {apexUA}, "Accept": {apexAccept}, "Content-Type": {apexCT}},
			check: func(t *testing.T, s seen) {
				want(t, "SFDC_STACK_DEPTH", s.Header.Get("SFDC_STACK_DEPTH"), "1")
				want(t, "body", string(s.Body), apexBody)
			},
		},
		{
			name:   "no User-Agent from the caller, none upstream",
			req:    get("/x"),
			header: http.Header{"User-Agent": {}, "Content-Length": {}, "Accept-Encoding": {}},
			check: func(t *testing.T, s seen) {
				want(t, "body", string(s.Body), "")
			},
		},
		{
			name:   "empty PUT sends Content-Length: 0",
			req:    &Request{Method: http.MethodPut, Path: "/x", Header: http.Header{}},
			header: http.Header{"Content-Length": {"0"}},
		},
		{
			name: "caller credentials and Prefer stay at the proxy",
			req: &Request{Method: http.MethodGet, Header: http.Header{
				"Authorization": {"Bearer caller.jwt"}, "Cookie": {"sid=1"}, "Proxy-Authorization": {"Basic eA=="},
				"Prefer": {"respond-async"}, "Callout-Source-Record": {"001000000000001AAA"},
			}},
			header: http.Header{"Authorization": {}, "Cookie": {}, "Proxy-Authorization": {}, "Prefer": {}, "Callout-Source-Record": {"001000000000001AAA"}},
			check: func(t *testing.T, s seen) {
				want(t, "request URI", s.RequestURI, "/base")
			},
		},
		{
			name:     "injected headers win over the caller's",
			injected: map[string]config.SecretRef{"Authorization": {Env: "UP_AUTH"}, "X-Api-Key": {Env: "UP_KEY"}},
			req: &Request{Method: http.MethodGet, Path: "/x", Header: http.Header{
				"Authorization": {"Bearer caller.jwt"}, "X-Api-Key": {"caller-key"}, "x-api-key": {"caller-key-2"},
			}},
			header: http.Header{"Authorization": {"Bearer upstream-token"}, "X-Api-Key": {"upstream-key"}},
		},
		{
			name:     "empty Connection next to Connection: X-Api-Key",
			injected: map[string]config.SecretRef{"X-Api-Key": {Env: "UP_KEY"}},
			req: &Request{Method: http.MethodGet, Path: "/x", Header: http.Header{
				"Connection": {"", "X-Api-Key"}, "X-Api-Key": {"caller-key"}, "X-Other": {"1"},
			}},
			header: http.Header{"X-Api-Key": {"upstream-key"}, "X-Other": {"1"}},
		},
		{
			name:     "Connection: Authorization keeps the injected Authorization",
			injected: map[string]config.SecretRef{"Authorization": {Env: "UP_AUTH"}},
			req: &Request{Method: http.MethodGet, Path: "/x", Header: http.Header{
				"Connection": {"Authorization"}, "Authorization": {"Bearer caller.jwt"},
			}},
			header: http.Header{"Authorization": {"Bearer upstream-token"}},
		},
		{
			name: "Upgrade: h2c with HTTP2-Settings is not forwarded",
			req: &Request{Method: http.MethodGet, Path: "/x", Header: http.Header{
				"Connection": {"Upgrade, HTTP2-Settings"}, "Upgrade": {"h2c"},
				"Http2-Settings": {"AAMAAABkAARAAAAAAAIAAAAA"},
			}},
			header: http.Header{"Upgrade": {}, "Http2-Settings": {}},
			check: func(t *testing.T, s seen) {
				want(t, "proto", fmt.Sprint(s.ProtoMajor), "1")
			},
		},
		{
			name:   "TE: trailers is not forwarded",
			req:    &Request{Method: http.MethodGet, Path: "/x", Header: http.Header{"Te": {"trailers"}}},
			header: http.Header{"Te": {}},
		},
	}
}

// forwardEnv is the environment the injected headers are read from.
var forwardEnv = map[string]string{"UP_AUTH": "Bearer upstream-token", "UP_KEY": "upstream-key"}

func TestDoForwardsRequest(t *testing.T) {
	srv, rc := newBackend(t, nil)
	f := newForwarder(t, Options{Getenv: env(forwardEnv)})
	for i, tt := range forwardCases() {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, fmt.Sprintf("fwd-%d", i), srv.URL+"/base/")
			ep.Headers = tt.injected
			before := len(rc.all())
			a := do(f, ep, tt.req)
			if a.Err != nil || a.Response == nil || a.Response.Status != http.StatusOK || !a.Sent {
				t.Fatalf("attempt = %+v, want a sent 200", a)
			}
			all := rc.all()
			if len(all) != before+1 {
				t.Fatalf("backend saw %d requests, want 1", len(all)-before)
			}
			for k, vs := range tt.header {
				wantValues(t, all[before].Header, k, vs...)
			}
			if tt.check != nil {
				tt.check(t, all[before])
			}
		})
	}
}

// TestDoThroughFront sends Apex's request as raw bytes to a front server that
// hands the request it parsed to the forwarder, as the ingress does, so the
// headers are those a Go server really produces (underscore names, several
// Connection fields, an empty one).
func TestDoThroughFront(t *testing.T) {
	backend, rc := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"ch_1"}`)
	})
	f := newForwarder(t, Options{Getenv: env(map[string]string{"UP_KEY": "upstream-key"})})
	ep := newEndpoint(t, "front", backend.URL+"/v2")
	ep.Headers = map[string]config.SecretRef{"X-Api-Key": {Env: "UP_KEY"}}
	front := newFront(t, f, ep)

	raw := "POST /callout/front/v1/charges?expand=a%20b HTTP/1.1\r\n" +
		"Host: proxy.example.com\r\n" +
		"User-Agent: " + apexUA + "\r\n" +
		"Accept: " + apexAccept + "\r\n" +
		"SFDC_STACK_DEPTH: 1\r\n" +
		"Content-Type: " + apexCT + "\r\n" +
		"Authorization: Bearer caller.jwt\r\n" +
		"Connection:\r\n" +
		"Connection: X-Api-Key\r\n" +
		"X-Api-Key: caller-key\r\n" +
		"Te: trailers\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(apexBody)) + apexBody
	conn, err := net.Dial("tcp", front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	want(t, "status", fmt.Sprint(resp.StatusCode), "200")
	want(t, "response body", string(got), `{"id":"ch_1"}`)

	s := rc.only(t)
	want(t, "request URI", s.RequestURI, "/v2/v1/charges?expand=a%20b")
	want(t, "body", string(s.Body), apexBody)
	wantValues(t, s.Header, "User-Agent", apexUA)
	wantValues(t, s.Header, "Accept", apexAccept)
	wantValues(t, s.Header, "Content-Type", apexCT)
	want(t, "SFDC_STACK_DEPTH", s.Header.Get("SFDC_STACK_DEPTH"), "1")
	wantValues(t, s.Header, "X-Api-Key", "upstream-key")
	wantValues(t, s.Header, "Authorization")
	wantValues(t, s.Header, "Te")
	wantValues(t, s.Header, "Connection")
}

// newFront starts a server that does what the ingress does with a callout
// to ep: it hands the request it parsed, path below /callout/{name}, to the
// forwarder and writes the upstream's answer back.
func newFront(t *testing.T, f *Forwarder, ep *config.Endpoint) *httptest.Server {
	t.Helper()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a := f.Do(r.Context(), ep, &Request{Method: r.Method,
			Path:     strings.TrimPrefix(r.URL.EscapedPath(), "/callout/"+ep.Name),
			RawQuery: r.URL.RawQuery, Header: r.Header, Body: body})
		if a.Err != nil {
			http.Error(w, a.Err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range a.Response.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(a.Response.Status)
		_, _ = w.Write(a.Response.Body)
	}))
	t.Cleanup(front.Close)
	return front
}
