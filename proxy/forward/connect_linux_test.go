//go:build linux

package forward

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// fullListener returns the address of a loopback socket that listens with a
// backlog of 0 and never accepts, its accept queue already filled: Linux
// drops further SYNs, so a connect to it hangs until the dialer gives up.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 8 { // fill the accept queue until a connect hangs
		c, err := net.DialTimeout("tcp4", addr, 50*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the kernel kept accepting connections; cannot provoke a connect timeout")
	return ""
}

func TestDoConnectTimeout(t *testing.T) {
	addr := fullListener(t)
	f := newForwarder(t, Options{})
	ep := newEndpoint(t, "blackhole", "http://"+addr)
	ep.ConnectTimeout = 50 * time.Millisecond
	a := do(f, ep, get("/"))
	te, ok := errors.AsType[*policy.TimeoutError](a.Err)
	if !ok || te.Limit != "connect" {
		t.Fatalf("Err = %v, want a connect *policy.TimeoutError", a.Err)
	}
	if c := policy.Classify(0, a.Err); c.Reason != policy.ReasonConnectTimeout {
		t.Errorf("Classify = %+v, want connect_timeout", c)
	}
	if a.Sent {
		t.Error("Sent = true for a connect that never completed")
	}
}
