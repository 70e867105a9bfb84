package forward

import (
	"net/http"
	"testing"
)

// TestCheckedURLSentAsItIs: a Request carrying the URL its caller built
// with UpstreamURL (the ingress checks it before reading the body) is sent
// to that URL — its raw path, escapes and query byte for byte — without
// the path being checked and built a second time; a bad method is still
// refused before anything is sent.
func TestCheckedURLSentAsItIs(t *testing.T) {
	srv, rc := newBackend(t, nil)
	ep := newEndpoint(t, "orders", srv.URL+"/api")
	f := newForwarder(t, Options{})
	u, err := UpstreamURL(ep.BaseURL, "/a%20b/c!'", "x=1&y=%2F")
	if err != nil {
		t.Fatal(err)
	}
	// Path and RawQuery disagree with u: the checked URL is what is sent.
	req := &Request{Method: http.MethodPost, Path: "/ignored", RawQuery: "ignored=1", URL: u,
		Header: http.Header{}, Body: []byte(`{}`)}
	if a := do(f, ep, req); a.Err != nil || a.Response.Status != http.StatusOK {
		t.Fatalf("attempt = %+v", a)
	}
	if got := rc.only(t).RequestURI; got != "/api/a%20b/c!'?x=1&y=%2F" {
		t.Errorf("upstream saw %q, want the checked URL's /api/a%%20b/c!'?x=1&y=%%2F", got)
	}
	bad := &Request{Method: "BAD METHOD", URL: u, Header: http.Header{}}
	if a := do(f, ep, bad); a.Err == nil {
		t.Fatalf("a bad method was forwarded: %+v", a)
	}
	if n := len(rc.all()); n != 1 {
		t.Errorf("backend saw %d requests after a bad method, want 1", n)
	}
}
