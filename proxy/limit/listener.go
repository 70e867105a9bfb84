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
// (nothing read yet; past its NewGrace), idle between requests, or still
// reading a request's header, and only when every connection is running a
// request (or is new within its grace) does Accept wait until one ends. HTTP/1.1 lets a server close an idle connection at
// any time (RFC 9112 §9.5); clients reopen. So at most max connections are
// open, plus the one being accepted and those cut within CutGrace,
// whatever callers do.
//
// Organisation shares (contract §10, docs/limits.md): with a share set
// (SetShare, limits.max_connections_per_issuer), each connection running a
// request counts toward its organisation — the caller's JWT issuer, once
// the request path has verified its token (Running), and the group of
// requests whose token is not verified yet ("") until then. At the cap,
// while some group runs more requests than its share, the connection
// closed is the oldest idle keep-alive connection of the group running the
// most requests above its share, else that group's oldest request (cut:
// WasCut), and never another group's idle connection (its next write on the
// reused connection would fail), never a connection of a group within its share nor a
// new connection still sending its header; so one organisation's requests
// cannot hold every connection. With no group over its share, eviction is
// as above and Accept may wait.
//
// Wire it into the http.Server: Serve(l), ConnState: l.ConnState,
// ConnContext: l.ConnContext, and wrap the handler with l.Handler so that a
// connection running a request is not evicted. Safe for concurrent use.
type Listener struct {
	net.Listener
	max   int
	share int           // running connections per group; 0: no share
	grace time.Duration // how long a cut request may take to answer before its connection is closed
	now   func() time.Time

	mu      sync.Mutex
	conns   map[*Conn]struct{}
	byOrg   map[string]int // running connections per group ("": token not verified yet); no zero entries
	changed chan struct{}  // closed and replaced when a connection closes or turns evictable
	evicted int64
	cut     int64
}

// NewGrace is how long a new connection may take to send its first
// request's header before it may be closed to make room (when no
// organisation is over its share): a caller one TLS handshake away needs
// two or three round trips (100–300 ms across continents), and a burst of
// connections arriving together is read in turn. Within it a new
// connection is never evicted; at the cap with only such connections and
// running ones, Accept waits at most this long. A connection that never
// sends is closed by read_header_timeout anyway.
const NewGrace = 500 * time.Millisecond

// CutGrace is how long a request cut for its organisation's share has to
// answer (503 overloaded, Connection: close) before its connection is
// closed under it.
const CutGrace = time.Second

// NewListener wraps l with a cap of max open connections (max ≥ 1) and no
// organisation share.
func NewListener(l net.Listener, max int) *Listener {
	return &Listener{Listener: l, max: max, grace: CutGrace, now: time.Now, conns: map[*Conn]struct{}{},
		byOrg: map[string]int{}, changed: make(chan struct{})}
}

// SetShare sets the number of request-running connections one
// organisation may hold while another connection needs room at the cap
// (limits.max_connections_per_issuer; 0: no share). Call it before Serve.
func (l *Listener) SetShare(share int) {
	l.mu.Lock()
	l.share = share
	l.mu.Unlock()
}

// Share is the share SetShare set; 0 when none applies.
func (l *Listener) Share() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.share
}

// Conn is a connection accepted by a Listener.
type Conn struct {
	net.Conn
	l *Listener

	// guarded by l.mu
	evictable bool
	served    bool      // it ran a request: idle between requests when evictable
	since     time.Time // when it last became evictable, or started running a request
	running   bool      // a request runs: counted in l.byOrg[org]
	org       string    // the running request's organisation; "" until Running
	closed    bool
	cut       bool // closed to make room for another organisation's connection
	timer     *time.Timer
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
	c := &Conn{Conn: nc, l: l, evictable: true, since: l.now()}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			l.conns[c] = struct{}{}
			l.mu.Unlock()
			return c, nil
		}
		victim, cut, wake := l.victim()
		if victim != nil {
			l.drop(victim)
			l.evicted++
			l.conns[c] = struct{}{}
			if cut {
				l.cut++
				victim.cut = true
				victim.timer = time.AfterFunc(l.grace, func() { _ = victim.Conn.Close() })
			}
			l.mu.Unlock()
			if cut {
				// The request's body read (or the background read of a
				// request waiting for its upstream) fails at once; its
				// handler answers 503 (WasCut) and the connection closes.
				_ = victim.Conn.SetReadDeadline(time.Unix(1, 0))
			} else {
				_ = victim.Conn.Close()
			}
			return c, nil
		}
		changed := l.changed
		l.mu.Unlock()
		if wake <= 0 {
			<-changed
			continue
		}
		t := time.NewTimer(wake) // a new connection's NewGrace ends
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// victim is the connection to close to make room, as described on
// Listener, and whether it runs a request that is cut; nil when every
// connection runs a request within its group's share or is new within its
// NewGrace — then wake, if positive, is when the first of those turns
// evictable. l.mu held.
func (l *Listener) victim() (v *Conn, cut bool, wake time.Duration) {
	org, over := l.overShare()
	if over {
		// the over-share group's own idle connection, never another's:
		// closing others' keep-alive connections for its reconnects would
		// make their next write fail on a reused connection
		if v := l.oldest(func(c *Conn) bool { return c.evictable && c.served && c.org == org }); v != nil {
			return v, false, 0
		}
		return l.oldest(func(c *Conn) bool { return c.running && c.org == org }), true, 0
	}
	now := l.now()
	if v := l.oldest(func(c *Conn) bool { return c.evictable && (c.served || now.Sub(c.since) >= NewGrace) }); v != nil {
		return v, false, 0
	}
	if young := l.oldest(func(c *Conn) bool { return c.evictable }); young != nil {
		return nil, false, max(young.since.Add(NewGrace).Sub(now), time.Millisecond)
	}
	return nil, false, 0
}

// overShare is the group running the most requests, and whether that is
// more than the share. l.mu held.
func (l *Listener) overShare() (org string, over bool) {
	if l.share <= 0 {
		return "", false
	}
	most := 0
	for o, n := range l.byOrg {
		if n > most || (n == most && o < org) { // ties: the same group every time
			org, most = o, n
		}
	}
	return org, most > l.share
}

// oldest is the connection for which ok holds whose since is earliest;
// l.mu held.
func (l *Listener) oldest(ok func(*Conn) bool) *Conn {
	var v *Conn
	for c := range l.conns {
		if ok(c) && (v == nil || c.since.Before(v.since)) {
			v = c
		}
	}
	return v
}

// drop removes c from the open connections and its group's count; l.mu
// held.
func (l *Listener) drop(c *Conn) {
	c.closed = true
	delete(l.conns, c)
	l.stop(c)
}

// stop ends c's running request in its group's count; l.mu held.
func (l *Listener) stop(c *Conn) {
	if !c.running {
		return
	}
	c.running = false
	if n := l.byOrg[c.org] - 1; n > 0 {
		l.byOrg[c.org] = n
	} else {
		delete(l.byOrg, c.org)
	}
}

// Open is the number of connections open now; Evicted the number closed
// to make room since the start.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Evicted is the number of connections closed to make room, cut requests
// included.
func (l *Listener) Evicted() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.evicted
}

// Cut is the number of request-running connections closed to make room
// because their organisation ran more than its share (counted in Evicted
// too).
func (l *Listener) Cut() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// Running is the number of request-running connections of organisation
// org ("": those whose token is not verified yet).
func (l *Listener) Running(org string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byOrg[org]
}

// forget removes c and wakes a waiting Accept.
func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	if !c.closed {
		l.drop(c)
		l.signal()
	} else if c.timer != nil && c.timer.Stop() {
		c.timer = nil // closed by its handler within the grace
	}
	l.mu.Unlock()
}

// setEvictable marks c evictable (idle) or running a request of no known
// organisation yet; l.mu not held.
func (l *Listener) setEvictable(c *Conn, evictable bool) {
	l.mu.Lock()
	if !c.closed && c.evictable != evictable {
		c.evictable = evictable
		c.since = l.now()
		if evictable {
			l.stop(c)
			l.signal()
		} else {
			c.served, c.running, c.org = true, true, ""
			l.byOrg[""]++
		}
	}
	l.mu.Unlock()
}

// assign moves c's running request to organisation org; l.mu not held.
func (l *Listener) assign(c *Conn, org string) {
	l.mu.Lock()
	if !c.closed && c.running && c.org != org {
		l.stop(c)
		c.running, c.org = true, org
		l.byOrg[org]++
		l.signal() // a waiting Accept may now find a group over its share
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

// Running tells the listener of ctx's connection (ConnContext) that its
// request is one of organisation org — the caller's JWT issuer, once its
// token is verified — so it counts toward org's share from now until the
// request ends. A context of no Listener's connection: nothing.
func Running(ctx context.Context, org string) {
	if c, ok := ctx.Value(connKey{}).(*Conn); ok {
		c.l.assign(c, org)
	}
}

// WasCut reports whether ctx's connection (ConnContext) was closed to make
// room because its organisation ran more than its share of the
// connections: the handler answers 503 overloaded with Connection: close
// (its body read failed as a timeout, IsTimeout), within CutGrace.
func WasCut(ctx context.Context) bool {
	c, ok := ctx.Value(connKey{}).(*Conn)
	if !ok {
		return false
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.cut
}

// Handler marks the connection of each request as running one, so it is
// not evicted (but counted toward its group's share: "" until Running)
// until the request ends (the connection then turns idle, or closes).
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
