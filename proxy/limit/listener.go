package limit

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Listener caps the open connections of one listener (limits.max_connections,
// limits.admin_max_connections). Unlike golang.org/x/net/netutil's
// LimitListener, which stops accepting at the cap — so that a caller holding
// the cap with idle keep-alive connections (no token needed) makes every
// other caller wait in the kernel's queue — it makes room: at the cap, a new
// connection closes the oldest connection that is evictable, that is new
// (nothing read yet), idle between requests, or still reading a request's
// header, and only when every connection is running a request does Accept
// wait until one ends. HTTP/1.1 lets a server close an idle connection at
// any time (RFC 9112 §9.5); clients reopen. So at most max connections are
// open, plus the one being accepted, whatever callers do.
//
// Wire it into the http.Server: Serve(l), ConnState: l.ConnState,
// ConnContext: l.ConnContext, and wrap the handler with l.Handler so that a
// connection running a request is not evicted. Safe for concurrent use.
type Listener struct {
	net.Listener
	max int

	mu      sync.Mutex
	conns   map[*Conn]struct{}
	changed chan struct{} // closed and replaced when a connection closes or turns evictable
	evicted int64
}

// NewListener wraps l with a cap of max open connections (max ≥ 1).
func NewListener(l net.Listener, max int) *Listener {
	return &Listener{Listener: l, max: max, conns: map[*Conn]struct{}{}, changed: make(chan struct{})}
}

// Conn is a connection accepted by a Listener.
type Conn struct {
	net.Conn
	l *Listener

	// guarded by l.mu
	evictable bool
	since     time.Time // when it last became evictable
	closed    bool
}

// Close closes the connection and frees its place.
func (c *Conn) Close() error {
	c.l.forget(c)
	return c.Conn.Close()
}

// Accept waits for a connection, making room for it as described on
// Listener. Errors are the wrapped listener's.
func (l *Listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &Conn{Conn: nc, l: l, evictable: true, since: time.Now()}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			l.conns[c] = struct{}{}
			l.mu.Unlock()
			return c, nil
		}
		victim := l.oldestEvictable()
		if victim != nil {
			victim.closed = true
			delete(l.conns, victim)
			l.evicted++
			l.conns[c] = struct{}{}
			l.mu.Unlock()
			_ = victim.Conn.Close()
			return c, nil
		}
		changed := l.changed
		l.mu.Unlock()
		<-changed
	}
}

// oldestEvictable is the evictable connection evictable longest; l.mu held.
func (l *Listener) oldestEvictable() *Conn {
	var v *Conn
	for c := range l.conns {
		if c.evictable && (v == nil || c.since.Before(v.since)) {
			v = c
		}
	}
	return v
}

// Open is the number of connections open now; Evicted the number closed
// to make room since the start.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Evicted is the number of connections closed to make room.
func (l *Listener) Evicted() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.evicted
}

// forget removes c and wakes a waiting Accept.
func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	if !c.closed {
		c.closed = true
		delete(l.conns, c)
		l.signal()
	}
	l.mu.Unlock()
}

// setEvictable marks c; l.mu not held.
func (l *Listener) setEvictable(c *Conn, evictable bool) {
	l.mu.Lock()
	if !c.closed && c.evictable != evictable {
		c.evictable = evictable
		if evictable {
			c.since = time.Now()
			l.signal()
		}
	}
	l.mu.Unlock()
}

// signal wakes waiters; l.mu held.
func (l *Listener) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// ConnState is the http.Server's ConnState hook: an idle connection is
// evictable, a closed or hijacked one is forgotten. (A new connection is
// evictable from Accept; one reading a request's header stays evictable
// until Handler runs the request.)
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := unwrap(nc).(*Conn)
	if !ok || c.l != l {
		return
	}
	switch s {
	case http.StateIdle:
		l.setEvictable(c, true)
	case http.StateClosed, http.StateHijacked:
		l.forget(c)
	}
}

// connKey is the context key of a request's *Conn.
type connKey struct{}

// ConnContext is the http.Server's ConnContext hook: it records the
// connection in the context of its requests, for Handler.
func (l *Listener) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := unwrap(nc).(*Conn); ok && c.l == l {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Handler marks the connection of each request as running one, so it is
// not evicted, until next returns (the connection then turns idle, or
// closes).
func (l *Listener) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*Conn); ok && c.l == l {
			l.setEvictable(c, false)
		}
		next.ServeHTTP(w, r)
	})
}

// unwrap returns the connection below a *tls.Conn (tls.NewListener over a
// Listener), or nc itself.
func unwrap(nc net.Conn) net.Conn {
	if t, ok := nc.(interface{ NetConn() net.Conn }); ok {
		return t.NetConn()
	}
	return nc
}
