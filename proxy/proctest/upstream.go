package proctest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Request is one request an Upstream received, recorded once its body was
// read and before its handler ran.
type Request struct {
	// N is the request's 1-based number at its upstream; PathN its number
	// among the requests for its URL path, this one included.
	N, PathN   int
	Method     string
	RequestURI string
	// Path is the request's URL path (RequestURI without the query).
	Path   string
	Header http.Header
	Body   []byte
	// Start is when the whole request had been read; End when the handler
	// returned (zero while it runs). A handler cut off by its client's
	// disappearance ends when it noticed.
	Start, End time.Time
}

// Gauge counts the requests running at once and remembers the peak. Several
// upstreams may share one to measure a bound across them. The zero value is
// ready.
type Gauge struct{ cur, peak atomic.Int64 }

func (g *Gauge) enter() {
	n := g.cur.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
}

func (g *Gauge) leave() { g.cur.Add(-1) }

// Running is the number of requests running now.
func (g *Gauge) Running() int64 { return g.cur.Load() }

// Peak is the most requests that ran at once.
func (g *Gauge) Peak() int64 { return g.peak.Load() }

// Upstream is a real HTTP server on 127.0.0.1 standing in for an API behind
// the proxy. It records every request (body read first, and given to the
// handler again), counts the requests in flight, per Idempotency-Key too,
// then runs its handler. Handlers may block in Hold until the test calls
// Release (done when the test ends, before the server closes). Safe for
// concurrent use.
type Upstream struct {
	// URL is the server's base URL, http://127.0.0.1:port.
	URL string
	// InFlight counts this upstream's requests running at once.
	InFlight Gauge

	handler  http.HandlerFunc
	gauges   []*Gauge
	mu       sync.Mutex
	seen     []*Request
	byPath   map[string]int
	byKey    map[string]int // requests per Idempotency-Key
	active   map[string]int // running requests per Idempotency-Key
	overlaps []string       // a key each time a second request of it ran at once
	arrived  chan Request   // every request as it starts (buffered; extra ones are dropped)
	release  chan struct{}
	once     sync.Once
}

// requestKey carries a request's record in its context (Received).
type requestKey struct{}

// NewUpstream starts an upstream answering with h (nil: 200 with the JSON
// body {"ok":true}); its requests also count on every shared gauge. It is
// closed when the test ends, after Release.
func NewUpstream(t testing.TB, h http.HandlerFunc, shared ...*Gauge) *Upstream {
	t.Helper()
	u := &Upstream{handler: h, byPath: map[string]int{}, byKey: map[string]int{}, active: map[string]int{},
		arrived: make(chan Request, 256), release: make(chan struct{})}
	u.gauges = append([]*Gauge{&u.InFlight}, shared...)
	srv := httptest.NewServer(http.HandlerFunc(u.serve(t)))
	t.Cleanup(srv.Close)
	t.Cleanup(u.Release) // runs first: held handlers return before Close waits for them
	u.URL = srv.URL
	return u
}

func (u *Upstream) serve(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
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
		r.Body = io.NopCloser(bytes.NewReader(body))
		key := r.Header.Get("Idempotency-Key")
		u.mu.Lock()
		u.byPath[r.URL.Path]++
		rec := &Request{N: len(u.seen) + 1, PathN: u.byPath[r.URL.Path], Method: r.Method,
			RequestURI: r.RequestURI, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Start: time.Now()}
		u.seen = append(u.seen, rec)
		if key != "" {
			u.byKey[key]++
			if u.active[key]++; u.active[key] > 1 {
				u.overlaps = append(u.overlaps, key)
			}
		}
		u.mu.Unlock()
		select {
		case u.arrived <- *rec:
		default:
		}
		defer func() {
			u.mu.Lock()
			rec.End = time.Now()
			if key != "" {
				u.active[key]--
			}
			u.mu.Unlock()
		}()
		r = r.WithContext(context.WithValue(r.Context(), requestKey{}, u.received(rec)))
		if u.handler == nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		u.handler(w, r)
	}
}

// received is what Received returns for rec: its numbers, and the upstream
// for Hold.
type received struct {
	u   *Upstream
	rec Request
}

func (u *Upstream) received(rec *Request) received { return received{u: u, rec: *rec} }

// Received is the record of r, a request an Upstream's handler is
// answering (its numbers N and PathN); the zero Request for any other.
func Received(r *http.Request) Request {
	v, _ := r.Context().Value(requestKey{}).(received)
	return v.rec
}

// Hold blocks the handler of r until its upstream's Release, or until the
// client gives up on r.
func Hold(r *http.Request) {
	v, ok := r.Context().Value(requestKey{}).(received)
	if !ok {
		panic("proctest.Hold: not a request of an Upstream")
	}
	select {
	case <-v.u.release:
	case <-r.Context().Done():
	}
}

// Release lets every handler held in Hold (and every later one) go on.
func (u *Upstream) Release() { u.once.Do(func() { close(u.release) }) }

// Requests returns copies of the requests received so far, only those for
// requestURI when it is not "".
func (u *Upstream) Requests(requestURI string) []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []Request
	for _, r := range u.seen {
		if requestURI == "" || r.RequestURI == requestURI {
			out = append(out, *r)
		}
	}
	return out
}

// Hits is the number of requests received so far.
func (u *Upstream) Hits() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// HitsFor is the number of requests received so far for requestURI.
func (u *Upstream) HitsFor(requestURI string) int { return len(u.Requests(requestURI)) }

// PathHits is the number of requests received so far for the URL path.
func (u *Upstream) PathHits(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byPath[path]
}

// Request returns the one request received for requestURI, failing the
// test when there is not exactly one.
func (u *Upstream) Request(t testing.TB, requestURI string) Request {
	t.Helper()
	found := u.Requests(requestURI)
	if len(found) != 1 {
		t.Fatalf("upstream received %d requests for %s, want 1", len(found), requestURI)
	}
	return found[0]
}

// WaitRequest waits up to timeout for the next request to start and
// returns it.
func (u *Upstream) WaitRequest(t testing.TB, timeout time.Duration) Request {
	t.Helper()
	select {
	case r := <-u.arrived:
		return r
	case <-time.After(timeout):
		t.Fatalf("the upstream received no request within %s", timeout)
		return Request{}
	}
}

// Attempts is how many requests carried the Idempotency-Key key.
func (u *Upstream) Attempts(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byKey[key]
}

// CheckNoOverlap fails the test when two requests of one Idempotency-Key
// ever ran at the same time.
func (u *Upstream) CheckNoOverlap(t testing.TB) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.overlaps) > 0 {
		t.Errorf("%d concurrent attempts of one key at the upstream: %v", len(u.overlaps), u.overlaps)
	}
}
