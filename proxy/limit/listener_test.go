package limit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// capped starts an http.Server on a Listener of max connections whose
// handler blocks on release for the path /block.
func capped(t *testing.T, max int) (*Listener, string, chan struct{}) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(raw, max)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	srv := &http.Server{Handler: l.Handler(h), ConnState: l.ConnState, ConnContext: l.ConnContext,
		ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l, raw.Addr().String(), release
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// get sends GET path on c and reads the response.
func get(t *testing.T, c net.Conn, path string) (string, error) {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// closedByServer reports whether the server closed c (a read sees EOF or a
// reset), waiting at most 30 s.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !strings.Contains(err.Error(), "timeout")
}

// TestListenerEvictsIdleConnections: at the cap, idle connections and
// connections that sent nothing are closed to make room, the oldest first,
// so a caller holding the cap with idle connections cannot keep anyone out;
// a connection running a request is never closed for it.
func TestListenerEvictsIdleConnections(t *testing.T) {
	l, addr, release := capped(t, 3)
	defer close(release)
	busy := dial(t, addr)
	if _, err := io.WriteString(busy, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	kept := dial(t, addr)
	if body, err := get(t, kept, "/"); err != nil || body != "ok" {
		t.Fatalf("first request: %q, %v", body, err)
	}
	for l.Open() < 2 { // busy and kept accepted
		time.Sleep(time.Millisecond)
	}
	silent := dial(t, addr) // connects, never sends: the oldest evictable
	for l.Open() < 3 {
		time.Sleep(time.Millisecond)
	}
	next := dial(t, addr)
	if body, err := get(t, next, "/"); err != nil || body != "ok" {
		t.Fatalf("a new caller at the cap: %q, %v", body, err)
	}
	if l.Evicted() != 1 || l.Open() != 3 {
		t.Fatalf("evicted %d, open %d; want 1 and 3", l.Evicted(), l.Open())
	}
	if !closedByServer(kept) && !closedByServer(silent) {
		t.Fatal("neither idle connection was closed")
	}
	for range 20 { // many more callers: each served, the busy one never evicted
		c := dial(t, addr)
		if body, err := get(t, c, "/"); err != nil || body != "ok" {
			t.Fatalf("caller at the cap: %q, %v", body, err)
		}
	}
	if l.Open() > 3 {
		t.Fatalf("%d connections open, cap 3", l.Open())
	}
	release <- struct{}{}
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the busy request was cut: %v", err)
	}
}

// acceptCounter wraps a net.Listener and reports each connection its Accept
// returns, so a test knows when the Listener above it holds a connection.
type acceptCounter struct {
	net.Listener
	accepted chan struct{}
}

func (a acceptCounter) Accept() (net.Conn, error) {
	c, err := a.Listener.Accept()
	if err == nil {
		a.accepted <- struct{}{}
	}
	return c, err
}

// TestListenerWaitsWhenAllBusy: when every connection runs a request, a new
// connection waits, unserved, until one ends; then it is served. No
// wall-clock window: the test waits until both requests are inside the
// handler (so neither connection is evictable) and until the Listener has
// taken the third connection from the socket, then checks that Accept has
// not handed it out, and that only a request's end lets it through.
func TestListenerWaitsWhenAllBusy(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 3)
	l := NewListener(acceptCounter{Listener: raw, accepted: accepted}, 2)
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	handedOut := make(chan net.Conn, 3)
	srv := &http.Server{Handler: l.Handler(h), ConnState: l.ConnState, ConnContext: l.ConnContext,
		ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(handOut{Listener: l, out: handedOut}) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := raw.Addr().String()

	var busy []net.Conn
	for range 2 {
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
		<-accepted
		<-handedOut
		<-entered // the request runs: its connection is not evictable
	}
	waiting := dial(t, addr)
	<-accepted // the Listener holds the third connection and must make room or wait
	got := make(chan string, 1)
	go func() {
		body, err := get(t, waiting, "/")
		if err != nil {
			body = err.Error()
		}
		got <- body
	}()
	select {
	case <-handedOut:
		t.Fatal("Accept handed out a connection while every connection was busy")
	case body := <-got:
		t.Fatalf("served %q while every connection was busy", body)
	default:
	}
	if l.Open() != 2 || l.Evicted() != 0 {
		t.Fatalf("open %d, evicted %d while all busy; want 2 and 0", l.Open(), l.Evicted())
	}
	release <- struct{}{} // one request ends; its connection turns idle and makes room
	if body := <-got; body != "ok" {
		t.Fatalf("after a request ended: %q", body)
	}
	release <- struct{}{}
	for _, c := range busy {
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("a busy request was cut: %v", err)
		}
	}
	close(release)
	if l.Evicted() != 1 {
		t.Errorf("evicted %d; want 1, the connection whose request ended", l.Evicted())
	}
}

// handOut reports each connection the Listener's Accept hands to the server.
type handOut struct {
	*Listener
	out chan net.Conn
}

func (h handOut) Accept() (net.Conn, error) {
	c, err := h.Listener.Accept()
	if err == nil {
		h.out <- c
	}
	return c, err
}
