package limit

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands out the server ends of net.Pipe connections, one per
// dial, so a test drives a Listener's Accept itself, with no network.
type pipeListener struct {
	conns chan net.Conn
}

func (p *pipeListener) Accept() (net.Conn, error) { return <-p.conns, nil }
func (p *pipeListener) Close() error              { return nil }
func (p *pipeListener) Addr() net.Addr            { return &net.TCPAddr{} }

// shareRig is a Listener of max connections and the given share over a
// pipeListener, with a clock that moves one second at every reading, so
// "oldest" is the order things happened in.
type shareRig struct {
	t   *testing.T
	l   *Listener
	raw *pipeListener
}

func newShareRig(t *testing.T, max, share int) *shareRig {
	raw := &pipeListener{conns: make(chan net.Conn, 1)}
	l := NewListener(raw, max)
	l.SetShare(share)
	tick := time.Unix(0, 0)
	l.now = func() time.Time { tick = tick.Add(time.Second); return tick }
	return &shareRig{t: t, l: l, raw: raw}
}

// accept dials and accepts one connection, expecting Accept to find room
// at once (were it to wait, synctest reports the deadlock).
func (r *shareRig) accept() (c *Conn, ctx context.Context) {
	r.t.Helper()
	client, server := net.Pipe()
	r.t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	r.raw.conns <- server
	nc, err := r.l.Accept()
	if err != nil {
		r.t.Fatal(err)
	}
	c = nc.(*Conn)
	return c, r.l.ConnContext(context.Background(), c)
}

// run starts a request on c (as Handler does) and, org non-empty, tells the
// listener whose it is (as the ingress does once the token is verified).
func (r *shareRig) run(c *Conn, ctx context.Context, org string) {
	r.l.setEvictable(c, false)
	if org != "" {
		Running(ctx, org)
	}
}

// TestConnectionShareCutsTheOverShareOrganisation: at a cap of 6 with a
// share of 2, org-a runs 5 requests (3 over its share) and org-b 1. Each new
// connection cuts org-a's oldest request — read deadline passed, WasCut —
// never org-b's, and never the new connections accepted meanwhile (the
// failure a share prevents: org-a's next connection closing org-b's
// just-accepted one). Once org-a is down to its share, Accept waits.
func TestConnectionShareCutsTheOverShareOrganisation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 6, 2)
		type conn struct {
			c   *Conn
			ctx context.Context
		}
		var a []conn
		for range 5 {
			c, ctx := r.accept()
			r.run(c, ctx, "org-a")
			a = append(a, conn{c, ctx})
		}
		b, bctx := r.accept()
		r.run(b, bctx, "org-b")
		if r.l.Open() != 6 || r.l.Running("org-a") != 5 || r.l.Running("org-b") != 1 {
			t.Fatalf("open %d, org-a %d, org-b %d; want 6, 5, 1", r.l.Open(), r.l.Running("org-a"), r.l.Running("org-b"))
		}
		var fresh []*Conn
		for i := range 3 { // org-a is over its share by 3: three new connections get in at once
			c, _ := r.accept()
			fresh = append(fresh, c)
			if !WasCut(a[i].ctx) {
				t.Fatalf("new connection %d: org-a's oldest request (#%d) was not cut", i, i)
			}
			if _, err := a[i].c.Read(make([]byte, 1)); !IsTimeout(err) {
				t.Fatalf("a cut request's body read: %v, want a timeout (the handler answers 503)", err)
			}
		}
		if r.l.Open() != 6 || r.l.Cut() != 3 || r.l.Evicted() != 3 || r.l.Running("org-a") != 2 {
			t.Fatalf("open %d, cut %d, evicted %d, org-a running %d; want 6, 3, 3, 2",
				r.l.Open(), r.l.Cut(), r.l.Evicted(), r.l.Running("org-a"))
		}
		for i, c := range append(fresh, b) {
			if WasCut(r.l.ConnContext(context.Background(), c)) || c.closed {
				t.Fatalf("connection %d (new, or org-b's within its share) was closed", i)
			}
		}
		if WasCut(a[3].ctx) || WasCut(a[4].ctx) {
			t.Fatal("org-a's requests within its share were cut")
		}
		// Everybody within the share now, every connection busy: the next waits.
		for i, org := range []string{"org-c", "org-c", "org-d"} {
			r.run(fresh[i], r.l.ConnContext(context.Background(), fresh[i]), org)
		}
		got := make(chan *Conn)
		client, server := net.Pipe()
		defer client.Close()
		r.raw.conns <- server
		go func() { c, _ := r.l.Accept(); got <- c.(*Conn) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Accept made room although every organisation was within its share")
		default:
		}
		if r.l.Cut() != 3 {
			t.Fatalf("cut %d, want still 3", r.l.Cut())
		}
		r.l.ConnState(b, http.StateIdle) // org-b's request ends: its connection makes room
		if c := <-got; c == nil || !b.closed || WasCut(bctx) {
			t.Fatal("the waiting connection did not take org-b's idle place")
		}
	})
}

// TestConnectionShareIdleFirst: while an organisation is over its share,
// its own idle keep-alive connection is closed before any of its requests
// is cut (a client reopens it; nothing is lost), and another
// organisation's idle connection is never closed for it: that one's next
// write on the reused connection would fail.
func TestConnectionShareIdleFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 5, 1)
		bIdle, bctx := r.accept()
		r.run(bIdle, bctx, "org-b")
		r.l.ConnState(bIdle, http.StateIdle) // its request ended: idle between requests
		aIdle, aictx := r.accept()
		r.run(aIdle, aictx, "org-a")
		r.l.ConnState(aIdle, http.StateIdle)
		var actx []context.Context
		for range 3 {
			c, ctx := r.accept()
			r.run(c, ctx, "org-a")
			actx = append(actx, ctx)
		}
		r.accept()
		if !aIdle.closed || WasCut(aictx) || bIdle.closed {
			t.Fatalf("closed: org-a's idle %v (cut %v), org-b's idle %v; want org-a's idle closed, not cut, org-b's kept",
				aIdle.closed, WasCut(aictx), bIdle.closed)
		}
		for _, ctx := range actx {
			if WasCut(ctx) {
				t.Fatal("a request was cut while org-a's idle connection could be closed")
			}
		}
		if r.l.Cut() != 0 || r.l.Evicted() != 1 {
			t.Fatalf("cut %d, evicted %d; want 0, 1", r.l.Cut(), r.l.Evicted())
		}
		r.accept() // no idle one of org-a left: its oldest request goes, org-b's idle stays
		if !WasCut(actx[0]) || r.l.Cut() != 1 || bIdle.closed {
			t.Fatalf("org-a's oldest request cut %v (cut %d), org-b's idle closed %v; want cut, 1, kept",
				WasCut(actx[0]), r.l.Cut(), bIdle.closed)
		}
	})
}

// TestConnectionShareUnverifiedCountAsOneGroup: requests whose token is not
// verified yet are one group with the same share, so they are no way around
// it: 3 of them at a cap of 4 and a share of 2 lose their oldest to a new
// connection, while org-b's request stays.
func TestConnectionShareUnverifiedCountAsOneGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 4, 2)
		var u []context.Context
		for range 3 {
			c, ctx := r.accept()
			r.run(c, ctx, "")
			u = append(u, ctx)
		}
		b, bctx := r.accept()
		r.run(b, bctx, "org-b")
		if r.l.Running("") != 3 {
			t.Fatalf("unverified running %d, want 3", r.l.Running(""))
		}
		r.accept()
		if !WasCut(u[0]) || WasCut(bctx) || WasCut(u[1]) {
			t.Fatal("want the oldest unverified request cut, org-b's kept")
		}
	})
}

// TestConnectionShareCutGrace: a cut request's connection is closed under
// it after CutGrace if its handler has not closed it; one its handler
// closed in time is not closed again, and leaves the count once.
func TestConnectionShareCutGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 3, 1)
		stuck, sctx := r.accept()
		r.run(stuck, sctx, "org-a")
		answered, actx := r.accept()
		r.run(answered, actx, "org-a")
		x, xctx := r.accept()
		r.run(x, xctx, "org-a")
		r.accept() // cuts stuck
		r.accept() // cuts answered; its handler answers and closes it
		if !WasCut(sctx) || !WasCut(actx) {
			t.Fatal("both org-a requests should be cut")
		}
		_ = answered.Close()
		time.Sleep(CutGrace - time.Millisecond) // the bubble's clock
		if _, err := stuck.Conn.Read(make([]byte, 1)); !IsTimeout(err) {
			t.Fatalf("before CutGrace the stuck connection's read: %v, want the cut's timeout (still open)", err)
		}
		time.Sleep(2 * time.Millisecond)
		if _, err := stuck.Conn.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("after CutGrace the stuck connection's read: %v, want it closed", err)
		}
		if r.l.Open() != 3 || r.l.Running("org-a") != 1 || r.l.Cut() != 2 {
			t.Fatalf("open %d, org-a running %d, cut %d; want 3, 1, 2", r.l.Open(), r.l.Running("org-a"), r.l.Cut())
		}
	})
}

// TestConnectionShareOffWithoutShare: with no share (a single issuer), a
// listener whose connections all run requests makes nobody room, as
// before.
func TestConnectionShareOffWithoutShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 2, 0)
		var first *Conn
		for range 2 {
			c, ctx := r.accept()
			r.run(c, ctx, "org-a")
			first = cmp.Or(first, c)
		}
		client, server := net.Pipe()
		defer client.Close()
		r.raw.conns <- server
		got := make(chan struct{})
		go func() { _, _ = r.l.Accept(); close(got) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Accept made room with no share set")
		default:
		}
		if r.l.Cut() != 0 {
			t.Fatalf("cut %d with no share", r.l.Cut())
		}
		r.l.ConnState(first, http.StateIdle)
		<-got
	})
}

// TestConnectionShareNewGrace: with nobody over the share, a new connection
// is not closed to make room within NewGrace of its accept (a burst of
// connections is read in turn, a TLS caller needs round trips): at the cap,
// with one new connection and the rest running, Accept waits until that
// one's grace is over, then closes it — the bubble's clock, no wall time.
func TestConnectionShareNewGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 2, 0)
		r.l.now = time.Now
		busy, bctx := r.accept()
		r.run(busy, bctx, "org-a")
		young, _ := r.accept()
		start := time.Now()
		client, server := net.Pipe()
		defer client.Close()
		r.raw.conns <- server
		got := make(chan time.Duration)
		go func() { _, _ = r.l.Accept(); got <- time.Since(start) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a new connection within its grace was closed at once")
		default:
		}
		if waited := <-got; waited != NewGrace || !young.closed || busy.closed {
			t.Fatalf("waited %s (want %s), young closed %v, busy closed %v", waited, NewGrace, young.closed, busy.closed)
		}
	})
}
