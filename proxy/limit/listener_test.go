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

// TestListenerWaitsWhenAllBusy: when every connection runs a request, a new
// connection waits, unserved, until one ends; then it is served.
func TestListenerWaitsWhenAllBusy(t *testing.T) {
	l, addr, release := capped(t, 2)
	var busy []net.Conn
	for range 2 {
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
	}
	for l.Open() < 2 {
		time.Sleep(time.Millisecond)
	}
	waiting := dial(t, addr)
	got := make(chan string, 1)
	go func() {
		body, err := get(t, waiting, "/")
		if err != nil {
			body = err.Error()
		}
		got <- body
	}()
	select {
	case body := <-got:
		t.Fatalf("served %q while every connection was busy", body)
	case <-time.After(100 * time.Millisecond):
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
