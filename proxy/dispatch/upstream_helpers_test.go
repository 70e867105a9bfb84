package dispatch_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// seenReq is one request as an upstream received it.
type seenReq struct {
	Method, Path string
	// Key is the Idempotency-Key header as received.
	Key  string
	Body []byte
}

// gauge counts requests running at once and remembers the peak. Several
// upstreams may share one to measure a replica-wide bound.
type gauge struct{ cur, peak atomic.Int64 }

func (g *gauge) enter() {
	n := g.cur.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
}

func (g *gauge) leave() { g.cur.Add(-1) }

// reply answers one request; n is the 1-based number of requests this
// upstream has received for r's path, this one included.
type reply func(u *upstream, w http.ResponseWriter, r *http.Request, n int)

// upstream is a real HTTP server on 127.0.0.1 standing in for an API behind
// the proxy. It records every request (body read first), counts requests
// in flight on its own gauge and on any shared ones, then calls its reply.
// Replies may block in u.hold until the test calls u.release (also done
// when the test ends, before the server closes).
type upstream struct {
	URL    string
	own    gauge
	gauges []*gauge

	mu     sync.Mutex
	seen   []seenReq
	byPath map[string]int

	once sync.Once
	rel  chan struct{}
}

// newUpstream starts an upstream answering with fn.
func newUpstream(t testing.TB, fn reply, shared ...*gauge) *upstream {
	t.Helper()
	u := &upstream{byPath: map[string]int{}, rel: make(chan struct{})}
	u.gauges = append([]*gauge{&u.own}, shared...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, g := range u.gauges {
			g.enter()
		}
		defer func() {
			for _, g := range u.gauges {
				g.leave()
			}
		}()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream: read body: %v", err)
		}
		u.mu.Lock()
		u.seen = append(u.seen, seenReq{Method: r.Method, Path: r.URL.Path,
			Key: r.Header.Get("Idempotency-Key"), Body: body})
		u.byPath[r.URL.Path]++
		n := u.byPath[r.URL.Path]
		u.mu.Unlock()
		fn(u, w, r, n)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(u.release) // runs first: blocked replies return before Close waits for them
	u.URL = srv.URL
	return u
}

// release lets every reply blocked in hold (and every later one) go on.
func (u *upstream) release() { u.once.Do(func() { close(u.rel) }) }

// hold blocks until release or until the client gives up on r.
func (u *upstream) hold(r *http.Request) {
	select {
	case <-u.rel:
	case <-r.Context().Done():
	}
}

// requests returns every request received so far.
func (u *upstream) requests() []seenReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenReq(nil), u.seen...)
}

// hits is the number of requests received so far.
func (u *upstream) hits() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// hitsFor is the number of requests received so far for path.
func (u *upstream) hitsFor(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byPath[path]
}

// status answers code with a short body.
func status(code int) reply {
	return func(_ *upstream, w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

// sequence answers the n-th request of a path with codes[n-1], and the
// last code after that.
func sequence(codes ...int) reply {
	return func(_ *upstream, w http.ResponseWriter, _ *http.Request, n int) {
		code := codes[min(n, len(codes))-1]
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

// held blocks every request in hold, then answers code.
func held(code int) reply {
	return func(u *upstream, w http.ResponseWriter, r *http.Request, _ int) {
		u.hold(r)
		w.WriteHeader(code)
	}
}
