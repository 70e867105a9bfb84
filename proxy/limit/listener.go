package limit

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"slices"
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
// (SetShare, limits.max_connections_per_issuer), every open connection
// counts toward a group: its organisation — the caller's JWT issuer, once
// the request path has verified its token (Running) — and, while it runs a
// request, until its next request starts; before that the unverified group
// (""): a new connection, one still sending its first header, and a request
// whose token is not verified yet. At the cap, while some group holds more
// connections than its share, room is made from the groups over their
// share, the most over first, and from nobody else: that group's oldest
// idle keep-alive connection, else (the unverified group) its oldest
// connection still silent past NewGrace, else its oldest request still
// receiving its body (cut: the body read fails, WasCut, 503 overloaded with
// nothing stored or forwarded; of the unverified group only a request that
// has run for NewGrace, and while that group has a connection or request
// within its grace the new connection waits for it rather than cut another
// group's: a legitimate request leaves the group when its token is
// verified), and only if none is, its oldest request
// already past its body (cut too: the request path answers it at once, a
// keyed write 202 as it continues and a read 503 — Cut). Another group's
// idle connection is never closed for it (its next write on the reused
// connection would fail), nor a new connection within its NewGrace; so one
// organisation's connections cannot hold every one, and a tokenless
// attacker's silent connections count, and go, as the unverified group's.
// With no group over its share, eviction is as above and Accept may wait.
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
	byOrg   map[string]int // open connections per group ("": new, or token not verified yet); no zero entries
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

// SetShare sets the number of connections one organisation (or the
// unverified group) may hold while another connection needs room at the cap
// (limits.max_connections_per_issuer, resolved: a fair share follows
// auth.issuers; 0: no share), at start and at every reload.
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
	running   bool      // a request runs
	receiving bool      // the running request's body is still arriving (BodyRead not yet)
	org       string    // its group in l.byOrg: "" until a request's token is verified (Running)
	closed    bool
	cut       bool          // closed to make room for another organisation's connection
	cutC      chan struct{} // closed when cut
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
	c := &Conn{Conn: nc, l: l, evictable: true}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			l.add(c)
			l.mu.Unlock()
			return c, nil
		}
		victim, cut, wake := l.victim()
		if victim != nil {
			l.evicted++
			end := l.remove(victim, cut)
			l.add(c)
			l.mu.Unlock()
			end()
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

// remove takes v out of the open connections, cut (its request answers,
// WasCut and Cut, within the grace, then its connection closes) or closed;
// it returns what to do once l.mu is released. l.mu held.
func (l *Listener) remove(v *Conn, cut bool) (end func()) {
	l.drop(v)
	if !cut {
		return func() { _ = v.Conn.Close() }
	}
	l.cut++
	v.cut = true
	close(v.cutC)
	v.timer = time.AfterFunc(l.grace, func() { _ = v.Conn.Close() })
	// The request's body read (or the background read of a request waiting
	// for its upstream) fails at once; its handler answers (WasCut, Cut) and
	// the connection closes.
	return func() { _ = v.Conn.SetReadDeadline(time.Unix(1, 0)) }
}

// Offboard closes the connections of every organisation keep refuses (an
// issuer a reload removed from auth.issuers): its idle ones at once, its
// running requests cut as for the connection share (a body still
// arriving fails, 503 overloaded; a keyed write at its upstream is
// answered 202 as its attempt goes on; within CutGrace). Their tokens
// verified under the old configuration; their connections must not keep
// the listener full for the organisations that remain — with one issuer
// left no share applies, and nothing else would ever close them. It
// returns how many it closed and cut.
func (l *Listener) Offboard(keep func(org string) bool) (closed, cut int) {
	var ends []func()
	l.mu.Lock()
	for c := range l.conns {
		if c.org == "" || keep(c.org) { // in an organisation: running, or idle after a request
			continue
		}
		if c.running {
			cut++
		} else {
			closed++
		}
		ends = append(ends, l.remove(c, c.running))
	}
	if len(ends) > 0 {
		l.signal()
	}
	l.mu.Unlock()
	for _, end := range ends {
		end()
	}
	return closed, cut
}

// victim is the connection to close to make room, as described on
// Listener, and whether it runs a request that is cut; nil when no
// connection may go now — then wake, if positive, is when the first new
// connection's NewGrace ends. l.mu held.
func (l *Listener) victim() (v *Conn, cut bool, wake time.Duration) {
	now := l.now()
	young := func(c *Conn) bool { return c.evictable && !c.served }
	silent := func(c *Conn) bool { return young(c) && now.Sub(c.since) >= NewGrace }
	if over := l.overShare(); len(over) > 0 {
		of := func(org string, ok func(*Conn) bool) *Conn {
			return l.oldest(func(c *Conn) bool { return c.org == org && ok(c) })
		}
		// first what costs nobody anything: an over-share group's own idle
		// connection (never another's: closing others' keep-alive
		// connections for its reconnects would make their next write fail
		// on a reused connection), or its connection silent past NewGrace
		for _, org := range over {
			if v := of(org, func(c *Conn) bool { return (c.evictable && c.served) || silent(c) }); v != nil {
				return v, false, 0
			}
		}
		// the unverified group over its share: its own request that has run
		// for NewGrace (a legitimate one leaves the group when its token is
		// verified, a moment after its header arrived), the one still
		// receiving its body first; else, with a connection or request of
		// it within its grace, wait for that grace rather than cut another
		// group's request, though that group be more over its share. So a
		// tokenless attacker's connections never cut an organisation's
		// request, its burst included.
		if slices.Contains(over, "") {
			ripe := func(c *Conn) bool { return c.running && now.Sub(c.since) >= NewGrace }
			if v := of("", func(c *Conn) bool { return ripe(c) && c.receiving }); v != nil {
				return v, true, 0
			}
			if v := of("", ripe); v != nil {
				return v, true, 0
			}
			if y := of("", func(c *Conn) bool { return young(c) || c.running }); y != nil {
				return nil, false, max(y.since.Add(NewGrace).Sub(now), time.Millisecond)
			}
		}
		// then a request of the group most over its share, the one still
		// receiving its body first
		for _, org := range over {
			if v := of(org, func(c *Conn) bool { return c.running && c.receiving }); v != nil {
				return v, true, 0
			}
			if v := of(org, func(c *Conn) bool { return c.running }); v != nil {
				return v, true, 0
			}
		}
	} else if v := l.oldest(func(c *Conn) bool { return c.evictable && (c.served || silent(c)) }); v != nil {
		return v, false, 0
	}
	// wait for the first new connection's grace to end
	if y := l.oldest(func(c *Conn) bool { return young(c) && now.Sub(c.since) < NewGrace }); y != nil {
		return nil, false, max(y.since.Add(NewGrace).Sub(now), time.Millisecond)
	}
	return nil, false, 0
}

// overShare is the groups holding more connections than the share, the
// most first (ties: by name, so the unverified group "" first). l.mu held.
func (l *Listener) overShare() []string {
	if l.share <= 0 {
		return nil
	}
	var over []string
	for o, n := range l.byOrg {
		if n > l.share {
			over = append(over, o)
		}
	}
	slices.SortFunc(over, func(a, b string) int { return cmp.Or(cmp.Compare(l.byOrg[b], l.byOrg[a]), cmp.Compare(a, b)) })
	return over
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

// add opens c in the unverified group, its NewGrace starting now (not when
// the kernel queued it, nor while Accept waited for room); l.mu held.
func (l *Listener) add(c *Conn) {
	c.since = l.now()
	c.cutC = make(chan struct{})
	l.conns[c] = struct{}{}
	l.byOrg[c.org]++
}

// drop removes c from the open connections and its group's count; l.mu
// held.
func (l *Listener) drop(c *Conn) {
	c.closed, c.running = true, false
	delete(l.conns, c)
	l.leave(c)
}

// move moves c to group org; l.mu held.
func (l *Listener) move(c *Conn, org string) {
	if c.org != org {
		l.leave(c)
		c.org = org
		l.byOrg[org]++
	}
}

// leave takes c out of its group's count; l.mu held.
func (l *Listener) leave(c *Conn) {
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

// Holding is the number of open connections of organisation org ("": the
// unverified group: new connections, and requests whose token is not
// verified yet).
func (l *Listener) Holding(org string) int {
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

// setEvictable marks c evictable (idle, still in the group of its last
// request) or running a request (receiving: with a body still to arrive) of
// no known organisation yet; l.mu not held.
func (l *Listener) setEvictable(c *Conn, evictable, receiving bool) {
	l.mu.Lock()
	if !c.closed && c.evictable != evictable {
		c.evictable = evictable
		c.since = l.now()
		c.running, c.receiving = !evictable, receiving && !evictable
		if evictable {
			l.signal()
		} else {
			c.served = true
			l.move(c, "")
		}
	}
	l.mu.Unlock()
}

// assign moves c's running request to organisation org; l.mu not held.
func (l *Listener) assign(c *Conn, org string) {
	l.mu.Lock()
	if !c.closed && c.running && c.org != org {
		l.move(c, org)
		l.signal() // a waiting Accept may now find a group over its share
	}
	l.mu.Unlock()
}

// received marks c's running request as past its body; l.mu not held.
func (l *Listener) received(c *Conn) {
	l.mu.Lock()
	c.receiving = false
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
		l.setEvictable(c, true, false)
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

// BodyRead tells the listener of ctx's connection (ConnContext) that its
// request's body has arrived whole, so the request is cut for its
// organisation's share only when none of the organisation's requests is
// still receiving one (Listener). A context of no Listener's connection:
// nothing.
func BodyRead(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*Conn); ok {
		c.l.received(c)
	}
}

// Cut is closed when ctx's connection (ConnContext) is cut for its
// organisation's share (WasCut); nil (never ready) for a context of no
// Listener's connection. A request past its body watches it: its answer is
// due within CutGrace, so a keyed write answers 202 while its attempt goes
// on (contract §10). It is the connection's channel whether a share is in
// force now or not: a reload may set one while the request runs.
func Cut(ctx context.Context) <-chan struct{} {
	if c, ok := ctx.Value(connKey{}).(*Conn); ok {
		return c.cutC
	}
	return nil
}

// WasCut reports whether ctx's connection (ConnContext) was closed to make
// room because its organisation held more than its share of the
// connections: the handler answers 503 overloaded with Connection: close
// (its body read failed as a timeout, IsTimeout), or a keyed write past its
// body 202 (Cut), within CutGrace.
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
// not evicted (but counted toward its group's share: "" until Running; its
// body still arriving until BodyRead) until the request ends (the
// connection then turns idle, or closes).
func (l *Listener) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*Conn); ok && c.l == l {
			l.setEvictable(c, false, r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0)
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
