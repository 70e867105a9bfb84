package policy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// These tests make the Go stack produce real errors over loopback and check
// that Classify maps them as the constructed ones in classify_error_test.go.

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// hijacker answers nothing: it takes the connection and closes it, with an
// RST when reset is true (SO_LINGER 0).
func hijacker(t *testing.T, reset bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if tcp, ok := conn.(*net.TCPConn); ok && reset {
			if err := tcp.SetLinger(0); err != nil {
				t.Errorf("SetLinger: %v", err)
			}
		}
		_ = conn.Close()
	})
}

// blocker answers only when the request is done or the test ends.
func blocker(done <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
}

// newServer starts a plain-HTTP httptest server closed at cleanup.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// newTLSServer starts a TLS httptest server closed at cleanup.
func newTLSServer(t *testing.T, h http.Handler, mutate func(*tls.Config)) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are the point
	srv.TLS = &tls.Config{}
	if mutate != nil {
		mutate(srv.TLS)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// get sends a GET with a fresh transport (no connection reuse, so no
// transparent retry) and returns the error; a response is a test failure.
func get(t *testing.T, ctx context.Context, tr *http.Transport, target string) error {
	t.Helper()
	tr.DisableKeepAlives = true
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("GET %s: got %s, want an error", target, resp.Status)
	}
	return err
}

func TestClassifyRealNetworkErrors(t *testing.T) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })

	// Each case names the reason it must get and, in proof, the identity
	// the Go stack really gave its error, so a change in the stack that
	// moves an error to another rule shows up here.
	tests := []struct {
		name  string
		run   func(t *testing.T) error
		want  string
		proof func(error) bool
	}{
		{"dial closed port", func(t *testing.T) error {
			_, err := net.Dial("tcp", closedPort(t))
			return err
		}, ReasonConnectRefused, isErrno(syscall.ECONNREFUSED)},
		{"http to closed port", func(t *testing.T) error {
			return get(t, context.Background(), &http.Transport{}, "http://"+closedPort(t)+"/")
		}, ReasonConnectRefused, isErrno(syscall.ECONNREFUSED)},
		{"tls.Dial to plain http", func(t *testing.T) error {
			srv := newServer(t, noop)
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{ServerName: "example.com"})
			if err == nil {
				_ = conn.Close()
			}
			return err
		}, ReasonTLS, isType[tls.RecordHeaderError]},
		{"https client to plain http", func(t *testing.T) error {
			srv := newServer(t, noop)
			return get(t, context.Background(), &http.Transport{}, "https://"+srv.Listener.Addr().String()+"/")
		}, ReasonTLS, isErr(http.ErrSchemeMismatch)},
		{"https transport to plain http", func(t *testing.T) error {
			srv := newServer(t, noop)
			req, _ := http.NewRequest(http.MethodGet, "https://"+srv.Listener.Addr().String()+"/", nil)
			tr := &http.Transport{DisableKeepAlives: true}
			resp, err := tr.RoundTrip(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			return err
		}, ReasonTLS, isType[tls.RecordHeaderError]},
		{"untrusted certificate", func(t *testing.T) error {
			srv := newTLSServer(t, noop, nil)
			return get(t, context.Background(), &http.Transport{}, srv.URL)
		}, ReasonTLS, isType[x509.UnknownAuthorityError]},
		{"wrong host name", func(t *testing.T) error {
			srv := newTLSServer(t, noop, nil)
			tr := srv.Client().Transport.(*http.Transport).Clone()
			tr.TLSClientConfig.ServerName = "wrong.example"
			return get(t, context.Background(), tr, srv.URL)
		}, ReasonTLS, isType[x509.HostnameError]},
		{"client certificate required", func(t *testing.T) error {
			srv := newTLSServer(t, noop, func(c *tls.Config) { c.ClientAuth = tls.RequireAnyClientCert })
			return get(t, context.Background(), srv.Client().Transport.(*http.Transport).Clone(), srv.URL)
		}, ReasonTLS, isOp("remote error")},
		{"server closes without answer", func(t *testing.T) error {
			srv := newServer(t, hijacker(t, false))
			return get(t, context.Background(), &http.Transport{}, srv.URL)
		}, ReasonEOF, isErr(io.EOF)},
		{"server resets", func(t *testing.T) error {
			srv := newServer(t, hijacker(t, true))
			return get(t, context.Background(), &http.Transport{}, srv.URL)
		}, ReasonReset, isErrno(syscall.ECONNRESET)},
		{"canceled", func(t *testing.T) error {
			srv := newServer(t, noop)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return get(t, ctx, &http.Transport{}, srv.URL)
		}, ReasonCanceled, isErr(context.Canceled)},
		{"deadline passed", func(t *testing.T) error {
			srv := newServer(t, noop)
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			defer cancel()
			return get(t, ctx, &http.Transport{}, srv.URL)
		}, ReasonAttemptTimeout, isErr(context.DeadlineExceeded)},
		{"dial deadline passed", func(t *testing.T) error {
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			defer cancel()
			_, err := (&net.Dialer{}).DialContext(ctx, "tcp", closedPort(t))
			return err
		}, ReasonConnectTimeout, isOp("dial")},
		{"response header timeout", func(t *testing.T) error {
			srv := newServer(t, blocker(done))
			return get(t, context.Background(), &http.Transport{ResponseHeaderTimeout: 20 * time.Millisecond}, srv.URL)
		}, ReasonAttemptTimeout, isTimeoutErr},
		{"response header timeout marked by forwarder", func(t *testing.T) error {
			srv := newServer(t, blocker(done))
			err := get(t, context.Background(), &http.Transport{ResponseHeaderTimeout: 20 * time.Millisecond}, srv.URL)
			return &TimeoutError{Limit: "header", Err: err}
		}, ReasonHeaderTimeout, isType[*TimeoutError]},
		{"dns resolver unreachable", func(t *testing.T) error {
			r := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
				return nil, errors.New("no resolver in this test")
			}}
			d := &net.Dialer{Resolver: r}
			tr := &http.Transport{DialContext: d.DialContext}
			return get(t, context.Background(), tr, "http://api.example.invalid/")
		}, ReasonDNS, isType[*net.DNSError]},
		{"dns server refused", func(t *testing.T) error {
			dns := closedPort(t)
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", dns)
			}}
			_, err := r.LookupHost(context.Background(), "api.example.invalid")
			return err
		}, ReasonDNS, isType[*net.DNSError]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(t)
			if err == nil {
				t.Fatal("got no error")
			}
			if !tt.proof(err) {
				t.Errorf("%q [%T] is not what this case expects from the Go stack", err, err)
			}
			want := Classification{Outcome: Retryable, Reason: tt.want}
			if got := Classify(0, err); got != want {
				t.Errorf("Classify(0, %q [%T]) = %+v, want %+v", err, err, got, want)
			}
		})
	}
}

// Proof helpers for TestClassifyRealNetworkErrors.

func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func isErrno(errno syscall.Errno) func(error) bool { return isErr(errno) }

func isType[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}

func isOp(op string) func(error) bool {
	return func(err error) bool {
		o, ok := errors.AsType[*net.OpError](err)
		for ok && o.Op != op {
			o, ok = errors.AsType[*net.OpError](o.Err)
		}
		return ok
	}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
