package limit

import (
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
	r.l.setEvictable(c, false, true)
	if org != "" {
		Running(ctx, org)
	}
}

// acceptLater dials one connection and accepts it in a goroutine, which
// sends what Accept returned on the channel it returns (nil: an error).
func (r *shareRig) acceptLater() <-chan *Conn {
	client, server := net.Pipe()
	r.t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	r.raw.conns <- server
	got := make(chan *Conn, 1)
	go func() {
		c, _ := r.l.Accept()
		cc, _ := c.(*Conn)
		got <- cc
	}()
	return got
}

// running accepts a connection and starts a request of org on it (run).
func (r *shareRig) running(org string) (*Conn, context.Context) {
	r.t.Helper()
	c, ctx := r.accept()
	r.run(c, ctx, org)
	return c, ctx
}

// pastBody is running with the request's body read to its end: the
// request is at its upstream.
func (r *shareRig) pastBody(org string) context.Context {
	r.t.Helper()
	_, ctx := r.running(org)
	BodyRead(ctx)
	return ctx
}

// runN is running n times; it returns the connections and their contexts,
// oldest first.
func (r *shareRig) runN(n int, org string) ([]*Conn, []context.Context) {
	r.t.Helper()
	cs, ctxs := make([]*Conn, n), make([]context.Context, n)
	for i := range n {
		cs[i], ctxs[i] = r.running(org)
	}
	return cs, ctxs
}

// stillWaiting fails t with msg when the Accept behind got (acceptLater)
// returned by the time every goroutine of the bubble is blocked.
func stillWaiting(t *testing.T, got <-chan *Conn, msg string) {
	t.Helper()
	synctest.Wait()
	select {
	case <-got:
		t.Fatal(msg)
	default:
	}
}

// noneCut fails t when a request of ctxs was cut; while says when.
func noneCut(t *testing.T, ctxs []context.Context, while string) {
	t.Helper()
	for i, ctx := range ctxs {
		if WasCut(ctx) {
			t.Fatalf("request %d was cut %s", i, while)
		}
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
		a, actx := r.runN(5, "org-a")
		b, bctx := r.running("org-b")
		if r.l.Open() != 6 || r.l.Holding("org-a") != 5 || r.l.Holding("org-b") != 1 {
			t.Fatalf("open %d, org-a %d, org-b %d; want 6, 5, 1", r.l.Open(), r.l.Holding("org-a"), r.l.Holding("org-b"))
		}
		var fresh []*Conn
		for i := range 3 { // org-a is over its share by 3: three new connections get in at once
			c, _ := r.accept()
			fresh = append(fresh, c)
			if !WasCut(actx[i]) {
				t.Fatalf("new connection %d: org-a's oldest request (#%d) was not cut", i, i)
			}
			if _, err := a[i].Read(make([]byte, 1)); !IsTimeout(err) {
				t.Fatalf("a cut request's body read: %v, want a timeout (the handler answers 503)", err)
			}
		}
		if r.l.Open() != 6 || r.l.Cut() != 3 || r.l.Evicted() != 3 || r.l.Holding("org-a") != 2 {
			t.Fatalf("open %d, cut %d, evicted %d, org-a running %d; want 6, 3, 3, 2",
				r.l.Open(), r.l.Cut(), r.l.Evicted(), r.l.Holding("org-a"))
		}
		for i, c := range append(fresh, b) {
			if WasCut(r.l.ConnContext(context.Background(), c)) || c.closed {
				t.Fatalf("connection %d (new, or org-b's within its share) was closed", i)
			}
		}
		noneCut(t, actx[3:], "of org-a's within its share")
		// Everybody within the share now, every connection busy: the next waits.
		for i, org := range []string{"org-c", "org-c", "org-d"} {
			r.run(fresh[i], r.l.ConnContext(context.Background(), fresh[i]), org)
		}
		got := r.acceptLater()
		stillWaiting(t, got, "Accept made room although every organisation was within its share")
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
		bIdle, _ := r.running("org-b")
		r.l.ConnState(bIdle, http.StateIdle) // its request ended: idle between requests
		aIdle, aictx := r.running("org-a")
		r.l.ConnState(aIdle, http.StateIdle)
		_, actx := r.runN(3, "org-a")
		r.accept()
		if !aIdle.closed || WasCut(aictx) || bIdle.closed {
			t.Fatalf("closed: org-a's idle %v (cut %v), org-b's idle %v; want org-a's idle closed, not cut, org-b's kept",
				aIdle.closed, WasCut(aictx), bIdle.closed)
		}
		noneCut(t, actx, "while org-a's idle connection could be closed")
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
		_, u := r.runN(3, "")
		_, bctx := r.running("org-b")
		if r.l.Holding("") != 3 {
			t.Fatalf("unverified running %d, want 3", r.l.Holding(""))
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
		stuck, sctx := r.running("org-a")
		answered, actx := r.running("org-a")
		r.running("org-a")
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
		if r.l.Open() != 3 || r.l.Holding("org-a") != 1 || r.l.Cut() != 2 {
			t.Fatalf("open %d, org-a running %d, cut %d; want 3, 1, 2", r.l.Open(), r.l.Holding("org-a"), r.l.Cut())
		}
	})
}

// TestConnectionShareOffWithoutShare: with no share (a single issuer), a
// listener whose connections all run requests makes nobody room, as
// before.
func TestConnectionShareOffWithoutShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 2, 0)
		cs, _ := r.runN(2, "org-a")
		first := cs[0]
		got := r.acceptLater()
		stillWaiting(t, got, "Accept made room with no share set")
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
		busy, _ := r.running("org-a")
		young, _ := r.accept()
		start := time.Now()
		got := r.acceptLater()
		stillWaiting(t, got, "a new connection within its grace was closed at once")
		if <-got; time.Since(start) != NewGrace || !young.closed || busy.closed {
			t.Fatalf("waited %s (want %s), young closed %v, busy closed %v", time.Since(start), NewGrace, young.closed, busy.closed)
		}
	})
}

// TestConnectionShareCutsReceivingFirst: of an over-share organisation's
// requests, one still receiving its body is cut before an older one past
// its body (that one is at its upstream: cutting it would lose its answer);
// with none receiving, the oldest past its body is cut, and its Cut channel
// closes so that its handler answers at once.
func TestConnectionShareCutsReceivingFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 4, 1)
		p1ctx := r.pastBody("org-a")
		_, rctx := r.running("org-a")
		p2ctx := r.pastBody("org-a")
		_, bctx := r.running("org-b")
		n1, n1ctx := r.accept()
		if !WasCut(rctx) || WasCut(p1ctx) || WasCut(p2ctx) {
			t.Fatalf("cut: receiving %v, older past its body %v, newer past its body %v; want only the receiving one",
				WasCut(rctx), WasCut(p1ctx), WasCut(p2ctx))
		}
		r.run(n1, n1ctx, "org-c")
		r.accept()
		select {
		case <-Cut(p1ctx):
		default:
			t.Fatal("with none receiving, the oldest request past its body was not cut (its Cut channel is open)")
		}
		select {
		case <-Cut(p2ctx):
			t.Fatal("org-a's request within its share was cut")
		default:
		}
		if WasCut(bctx) || r.l.Cut() != 2 {
			t.Fatalf("org-b cut %v, cuts %d; want false, 2", WasCut(bctx), r.l.Cut())
		}
	})
}

// TestConnectionShareSilentConnectionsCount: new connections that send
// nothing count toward the unverified group, so a tokenless attacker's
// silent connections can never make another organisation's requests the
// ones cut: org-b runs some requests and 3 silent connections hold the
// rest of the cap; the next connection waits for the oldest silent one's
// NewGrace (the bubble's clock) and takes its place; org-b's requests are
// never cut — also when org-b is further over its share (a burst) than the
// unverified group: a new connection waits for the group's grace rather
// than cut the burst.
func TestConnectionShareSilentConnectionsCount(t *testing.T) {
	for _, tt := range []struct {
		name    string
		max, bn int // the cap, org-b's requests (share 2)
	}{
		{"as many as the silent ones", 6, 3},
		{"a burst further over its share", 7, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newShareRig(t, tt.max, 2)
				r.l.now = time.Now
				_, bctx := r.runN(tt.bn, "org-b")
				var silent []*Conn
				start := time.Now() // the oldest silent connection's accept
				for range 3 {
					c, _ := r.accept()
					silent = append(silent, c)
					time.Sleep(time.Millisecond) // the bubble's clock: each younger than the one before
				}
				if r.l.Holding("") != 3 || r.l.Holding("org-b") != tt.bn {
					t.Fatalf("unverified %d, org-b %d; want 3, %d", r.l.Holding(""), r.l.Holding("org-b"), tt.bn)
				}
				<-r.acceptLater()
				if waited := time.Since(start); waited != NewGrace || !silent[0].closed || silent[1].closed {
					t.Fatalf("waited %s (want %s), oldest silent closed %v, next closed %v; want it alone closed",
						waited, NewGrace, silent[0].closed, silent[1].closed)
				}
				noneCut(t, bctx, "of org-b's for the silent connections")
			})
		})
	}
}

// TestConnectionShareIdleCounts: idle keep-alive connections count toward
// their organisation, so an organisation holding the cap with idle ones has
// them closed, not another's requests cut: org-z keeps 3 idle, org-b runs 3
// (cap 6, share 2); the next connection closes org-z's oldest idle one.
func TestConnectionShareIdleCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 6, 2)
		idle, _ := r.runN(3, "org-z")
		for _, c := range idle {
			r.l.ConnState(c, http.StateIdle)
		}
		_, bctx := r.runN(3, "org-b")
		r.accept()
		if !idle[0].closed || r.l.Cut() != 0 {
			t.Fatalf("org-z's oldest idle closed %v, cuts %d; want true, 0", idle[0].closed, r.l.Cut())
		}
		noneCut(t, bctx, "of org-b's while org-z held idle connections")
	})
}

// TestConnectionShareUnverifiedRequestGrace: a request whose token is not
// verified yet counts toward the unverified group but is cut only once it
// has run for NewGrace, so a tokenless attacker's silent connections never
// cut another organisation's request on its way in (in the moment between
// its header and its token check). At a cap of 3 and a share of 1, org-b
// runs one request, a silent connection arrives, and 100 ms later a request
// whose token is still being checked: the next connection waits for the
// silent one's grace and closes it, leaving the request alone; one more
// connection, with the request still unverified, cuts it when its own grace
// ends (600 ms after the start), not at once.
func TestConnectionShareUnverifiedRequestGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 3, 1)
		r.l.now = time.Now
		start := time.Now()
		_, bctx := r.running("org-b")
		silent, _ := r.accept()
		time.Sleep(100 * time.Millisecond)
		_, uctx := r.running("")
		acceptAt := func() time.Duration {
			client, server := net.Pipe()
			t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
			r.raw.conns <- server
			if _, err := r.l.Accept(); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		if at := acceptAt(); at != NewGrace || !silent.closed || WasCut(uctx) {
			t.Fatalf("first: accepted at %s (want %s), silent closed %v, unverified request cut %v; want the silent one closed",
				at, NewGrace, silent.closed, WasCut(uctx))
		}
		if at := acceptAt(); at != 100*time.Millisecond+NewGrace || !WasCut(uctx) || WasCut(bctx) {
			t.Fatalf("second: accepted at %s (want %s), unverified request cut %v, org-b cut %v; want the unverified one cut",
				at, 100*time.Millisecond+NewGrace, WasCut(uctx), WasCut(bctx))
		}
	})
}

// TestConnectionShareCutAfterReload: a request's Cut channel, taken while
// no share is in force (one issuer), still closes when a reload sets a
// share and the request is cut for it, so its handler answers in time
// (a keyed write 202) rather than having its connection closed under it.
func TestConnectionShareCutAfterReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 2, 0)
		ctx1 := r.pastBody("org-a")
		r.pastBody("org-a")
		cut := Cut(ctx1) // as the write path takes it, before the reload
		r.l.SetShare(1)
		r.accept()
		select {
		case <-cut:
		default:
			t.Fatalf("the oldest request was cut (WasCut %v) but the Cut channel taken before the reload did not close",
				WasCut(ctx1))
		}
	})
}

// TestOffboardClosesARemovedOrganisation: a reload that removes org-a
// from the issuers closes org-a's idle connection and cuts its running
// request (WasCut, its Cut channel closed), and leaves org-b's and the
// unverified group's alone, with no share in force (one issuer left).
func TestOffboardClosesARemovedOrganisation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newShareRig(t, 8, 0)
		_, runCtx := r.running("org-a")
		idle, _ := r.running("org-a")
		r.l.ConnState(idle, http.StateIdle)
		b, bctx := r.running("org-b")
		fresh, _ := r.accept()
		closed, cut := r.l.Offboard(func(org string) bool { return org == "org-b" })
		if closed != 1 || cut != 1 || !idle.closed || !WasCut(runCtx) || WasCut(bctx) || b.closed || fresh.closed {
			t.Fatalf("offboard: closed %d, cut %d; idle closed %v, running cut %v, org-b cut %v, new closed %v; "+
				"want org-a's two gone and the others kept", closed, cut, idle.closed, WasCut(runCtx), WasCut(bctx),
				fresh.closed)
		}
		select {
		case <-Cut(runCtx):
		default:
			t.Fatal("the cut request's Cut channel is open")
		}
		if r.l.Open() != 2 {
			t.Fatalf("open %d, want 2", r.l.Open())
		}
	})
}
