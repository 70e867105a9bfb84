package multiproc

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// hit is one request an upstream received.
type hit struct {
	// N is the request's 1-based number at this upstream.
	N      int
	Method string
	URI    string
	Header http.Header
	Body   string
	// Start is when the whole request had been read; End when the handler
	// returned (zero while it runs). A handler cut off by its client's
	// disappearance ends when it noticed.
	Start, End time.Time
}

// upstream is a real HTTP server on 127.0.0.1 standing in for an API
// behind the proxy: it records every request, with its start and end
// times, then runs its handler.
type upstream struct {
	URL string

	mu      sync.Mutex
	hits    []*hit
	arrived chan hit // every hit as it starts (buffered; extra ones are dropped)
}

// handler answers the n-th request (1-based) of an upstream.
type handler func(w http.ResponseWriter, r *http.Request, n int)

// newUpstream starts an upstream running h. It closes when the test ends,
// after the replicas (Cleanups run last registered first, and replicas
// are started after their upstreams).
func newUpstream(t *testing.T, h handler) *upstream {
	t.Helper()
	u := &upstream{arrived: make(chan hit, 256)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		rec := &hit{N: len(u.hits) + 1, Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(),
			Body: string(body), Start: time.Now()}
		u.hits = append(u.hits, rec)
		u.mu.Unlock()
		select {
		case u.arrived <- *rec:
		default:
		}
		defer func() {
			u.mu.Lock()
			rec.End = time.Now()
			u.mu.Unlock()
		}()
		h(w, r, rec.N)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

// snapshot returns copies of the hits so far, for requestURI when it is
// not "".
func (u *upstream) snapshot(requestURI string) []hit {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []hit
	for _, h := range u.hits {
		if requestURI == "" || h.URI == requestURI {
			out = append(out, *h)
		}
	}
	return out
}

// waitHit waits up to timeout for the next hit to start and returns it.
func (u *upstream) waitHit(t *testing.T, timeout time.Duration) hit {
	t.Helper()
	select {
	case h := <-u.arrived:
		return h
	case <-time.After(timeout):
		t.Fatalf("the upstream received no request within %s", timeout)
		return hit{}
	}
}

// reply answers status with a JSON body.
func reply(status int, body string) handler {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// failFirst answers the first n requests with fail, the rest with ok.
func failFirst(n int, fail, ok handler) handler {
	return func(w http.ResponseWriter, r *http.Request, i int) {
		if i <= n {
			fail(w, r, i)
			return
		}
		ok(w, r, i)
	}
}

// resetConnection reads the request (newUpstream already did) and resets
// the connection: hijacked and closed with SO_LINGER 0, so the proxy sees
// an RST after sending the whole request, and no response.
func resetConnection(t *testing.T) handler {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
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

// wantProblem asserts a proxy-made error (contract §2): status, outcome,
// application/problem+json, and the type ending in code. It returns the
// decoded body.
func wantProblem(t *testing.T, resp response, status int, code problem.Code, out policy.Outcome) problem.Body {
	t.Helper()
	if resp.Status != status {
		t.Errorf("status = %d, want %d; body %s", resp.Status, status, resp.Body)
	}
	if got := resp.Header.Get("Callout-Outcome"); got != string(out) {
		t.Errorf("Callout-Outcome = %q, want %q", got, out)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var pb problem.Body
	if err := json.Unmarshal(resp.Body, &pb); err != nil {
		t.Fatalf("problem body %q: %v", resp.Body, err)
	}
	if want := problem.TypeBase + string(code); pb.Type != want {
		t.Errorf("problem type = %q, want %q (detail %q)", pb.Type, want, pb.Detail)
	}
	if pb.Outcome != out {
		t.Errorf("problem outcome = %q, want %q", pb.Outcome, out)
	}
	return pb
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
