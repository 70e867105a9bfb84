package multiproc

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// reply answers status with a JSON body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// failFirst answers the first n requests with fail, the rest with ok.
func failFirst(n int, fail, ok http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if proctest.Received(r).N <= n {
			fail(w, r)
			return
		}
		ok(w, r)
	}
}

// resetConnection reads the request (the Upstream already did) and resets
// the connection: hijacked and closed with SO_LINGER 0, so the proxy sees
// an RST after sending the whole request, and no response.
func resetConnection(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
			t.Errorf("SO_LINGER: %v", err)
		}
		_ = conn.Close()
	}
}

// wantProblem asserts a proxy-made error (contract §2) with
// proctest.WantProblem and returns the decoded body.
func wantProblem(t *testing.T, resp response, status int, code problem.Code, out policy.Outcome) problem.Body {
	t.Helper()
	return proctest.WantProblem(t, resp.Status, resp.Header, resp.Body, status, code, out)
}

// wantAccepted asserts a 202 of contract §4 and returns its status document:
// Callout-Outcome retryable, a Callout-Id, Location /v1/callouts/{id},
// and a body that is that callout's status document.
func wantAccepted(t *testing.T, resp response) (string, statusDoc) {
	t.Helper()
	if resp.Status != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body %s", resp.Status, resp.Body)
	}
	id := resp.Header.Get("Callout-Id")
	if id == "" {
		t.Fatalf("202 without Callout-Id: %v", resp.Header)
	}
	if got := resp.Header.Get("Callout-Outcome"); got != string(policy.Retryable) {
		t.Errorf("Callout-Outcome = %q, want retryable", got)
	}
	if got, want := resp.Header.Get("Location"), "/v1/callouts/"+id; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	doc := decodeDoc(t, resp.Body)
	if doc.ID != id {
		t.Errorf("202 document id = %q, want the Callout-Id %q", doc.ID, id)
	}
	return id, doc
}
