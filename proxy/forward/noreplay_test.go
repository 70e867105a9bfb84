package forward

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// TestWriteNeverReplayedByTransport: a keyed write whose reused keep-alive
// connection dies after the request was read reaches the upstream once and
// comes back as an error with Sent = true (contract §3: an unanswered write is
// ambiguous, or retried by the proxy's own schedule — never re-sent silently
// inside one attempt). The upstream is a raw TCP server so the test controls
// exactly when the connection dies.
func TestWriteNeverReplayedByTransport(t *testing.T) {
	for _, body := range []string{`{"amount":100}`, ""} {
		t.Run("body="+body, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			var mu sync.Mutex
			var writes int
			go serveRaw(ln, func(req *http.Request, conn net.Conn) bool {
				if req.Method == http.MethodGet {
					io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					return true
				}
				mu.Lock()
				writes++
				mu.Unlock()
				return false // read the write, then hang up without an answer
			})
			u, _ := url.Parse("http://" + ln.Addr().String())
			ep := &config.Endpoint{Name: "raw", BaseURL: u, URL: u.String(),
				Networks:       []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
				ConnectTimeout: time.Second, HeaderTimeout: 2 * time.Second, AttemptTimeout: 3 * time.Second}
			f := New(Options{})
			t.Cleanup(f.CloseIdleConnections)
			warm := f.Do(context.Background(), ep, &Request{Method: http.MethodGet, Path: "/warm", Header: http.Header{}})
			if warm.Err != nil || warm.Response.Status != 200 {
				t.Fatalf("warm-up: %+v", warm)
			}
			att := f.Do(context.Background(), ep, &Request{Method: http.MethodPost, Path: "/charges",
				Header: http.Header{"Idempotency-Key": {`"k-1"`}}, Body: []byte(body)})
			if att.Err == nil || !att.Sent {
				t.Fatalf("attempt = response %v, err %v, sent %v; want an error after sending", att.Response, att.Err, att.Sent)
			}
			if c := policy.Classify(0, att.Err); c.Outcome != policy.Retryable {
				t.Errorf("class = %+v, want retryable", c)
			}
			mu.Lock()
			defer mu.Unlock()
			if writes != 1 {
				t.Errorf("the upstream received the write %d times, want 1 (the transport re-sent it)", writes)
			}
		})
	}
}

// serveRaw accepts connections and reads HTTP/1.1 requests from each; a
// handler returning false closes the connection after reading the request.
func serveRaw(ln net.Listener, handle func(*http.Request, net.Conn) bool) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			br := bufio.NewReader(conn)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if !handle(req, conn) {
					return
				}
			}
		}()
	}
}
