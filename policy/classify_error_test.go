package policy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// Errors built the way the Go stack builds them: the syscall error inside
// *os.SyscallError inside *net.OpError inside *url.Error.
var (
	errUnexpectedEOFForTest = urlErr(io.ErrUnexpectedEOF)
	errResetForTest         = urlErr(opErr("read", sysErr("read", syscall.ECONNRESET)))
)

func urlErr(err error) error {
	return &url.Error{Op: "Post", URL: "https://api.example.com/v2/charges", Err: err}
}

func opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 443}, Err: err}
}

func sysErr(call string, errno syscall.Errno) error {
	return &os.SyscallError{Syscall: call, Err: errno}
}

func dnsErr(e net.DNSError) error { return urlErr(opErr("dial", &e)) }

func TestClassifyErrors(t *testing.T) {
	x509Unknown := x509.UnknownAuthorityError{}
	tests := []struct {
		name string
		err  error
		want string
	}{
		// DNS, every sort.
		{"dns not found", dnsErr(net.DNSError{Err: "no such host", Name: "api.example.com", IsNotFound: true}), ReasonDNS},
		{"dns timeout", dnsErr(net.DNSError{Err: "i/o timeout", Name: "api.example.com", IsTimeout: true}), ReasonDNS},
		{"dns temporary", dnsErr(net.DNSError{Err: "temporary failure", Name: "api.example.com", IsTemporary: true}), ReasonDNS},
		{"dns server misbehaving", dnsErr(net.DNSError{Err: "server misbehaving", Name: "api.example.com", Server: "10.0.0.2:53"}), ReasonDNS},
		{"dns timeout wrapping deadline", dnsErr(net.DNSError{Err: "i/o timeout", IsTimeout: true, UnwrapErr: context.DeadlineExceeded}), ReasonDNS},
		{"dns bare", &net.DNSError{Err: "no such host", IsNotFound: true}, ReasonDNS},
		// Connect.
		{"refused", urlErr(opErr("dial", sysErr("connect", syscall.ECONNREFUSED))), ReasonConnectRefused},
		{"refused bare errno", syscall.ECONNREFUSED, ReasonConnectRefused},
		{"host unreachable", urlErr(opErr("dial", sysErr("connect", syscall.EHOSTUNREACH))), ReasonUnreachable},
		{"network unreachable", urlErr(opErr("dial", sysErr("connect", syscall.ENETUNREACH))), ReasonUnreachable},
		{"host down", opErr("dial", sysErr("connect", syscall.EHOSTDOWN)), ReasonUnreachable},
		{"network down", opErr("dial", sysErr("connect", syscall.ENETDOWN)), ReasonUnreachable},
		{"dial timeout errno", urlErr(opErr("dial", sysErr("connect", syscall.ETIMEDOUT))), ReasonConnectTimeout},
		// Reset.
		{"reset on read", errResetForTest, ReasonReset},
		{"reset on write", urlErr(opErr("write", sysErr("write", syscall.ECONNRESET))), ReasonReset},
		{"broken pipe", urlErr(opErr("write", sysErr("write", syscall.EPIPE))), ReasonReset},
		{"aborted", urlErr(opErr("read", sysErr("read", syscall.ECONNABORTED))), ReasonReset},
		{"reset in %w chain", fmt.Errorf("attempt 3: %w", errResetForTest), ReasonReset},
		// TLS.
		{"record header", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), ReasonTLS},
		{"scheme mismatch", urlErr(http.ErrSchemeMismatch), ReasonTLS},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509Unknown}), ReasonTLS},
		{"unknown authority bare", x509Unknown, ReasonTLS},
		{"hostname", urlErr(x509.HostnameError{Host: "api.example.com"}), ReasonTLS},
		{"certificate invalid expired", urlErr(x509.CertificateInvalidError{Reason: x509.Expired}), ReasonTLS},
		{"system roots", x509.SystemRootsError{}, ReasonTLS},
		{"constraint violation", x509.ConstraintViolationError{}, ReasonTLS},
		{"unhandled critical extension", x509.UnhandledCriticalExtension{}, ReasonTLS},
		{"insecure algorithm", x509.InsecureAlgorithmError(x509.SHA1WithRSA), ReasonTLS},
		{"alert error", urlErr(tls.AlertError(40)), ReasonTLS},
		{"echrejection", &tls.ECHRejectionError{}, ReasonTLS},
		{"remote alert op", urlErr(&net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}), ReasonTLS},
		{"local alert op", urlErr(&net.OpError{Op: "local error", Err: errors.New("tls: bad certificate")}), ReasonTLS},
		{"untyped tls message", urlErr(errors.New("tls: server chose an unconfigured cipher suite")), ReasonTLS},
		{"untyped x509 message", fmt.Errorf("verify: %w", errors.New("x509: malformed certificate")), ReasonTLS},
		// EOF.
		{"eof", urlErr(io.EOF), ReasonEOF},
		{"unexpected eof", errUnexpectedEOFForTest, ReasonEOF},
		{"eof in join", errors.Join(errors.New("copy"), io.EOF), ReasonEOF},
		// Timeouts.
		{"timeout connect", &TimeoutError{Limit: "connect", Err: urlErr(opErr("dial", os.ErrDeadlineExceeded))}, ReasonConnectTimeout},
		{"timeout header", urlErr(&TimeoutError{Limit: "header", Err: context.DeadlineExceeded}), ReasonHeaderTimeout},
		{"timeout attempt", fmt.Errorf("forward: %w", &TimeoutError{Limit: "attempt", Err: context.DeadlineExceeded}), ReasonAttemptTimeout},
		{"timeout unknown limit", &TimeoutError{Limit: "body"}, ReasonAttemptTimeout},
		{"timeout empty limit", &TimeoutError{}, ReasonAttemptTimeout},
		{"timeout beats dns", &TimeoutError{Limit: "connect", Err: dnsErr(net.DNSError{IsTimeout: true})}, ReasonConnectTimeout},
		{"timeout beats canceled", &TimeoutError{Limit: "header", Err: context.Canceled}, ReasonHeaderTimeout},
		{"timeout beats reset", &TimeoutError{Limit: "attempt", Err: errResetForTest}, ReasonAttemptTimeout},
		{"deadline exceeded", urlErr(context.DeadlineExceeded), ReasonAttemptTimeout},
		{"os deadline exceeded on read", urlErr(opErr("read", os.ErrDeadlineExceeded)), ReasonAttemptTimeout},
		{"os deadline exceeded on dial", urlErr(opErr("dial", os.ErrDeadlineExceeded)), ReasonConnectTimeout},
		{"net.Error timeout", urlErr(timeoutOnly{}), ReasonAttemptTimeout},
		// Canceled.
		{"canceled", urlErr(context.Canceled), ReasonCanceled},
		{"canceled dial", urlErr(opErr("dial", fmt.Errorf("operation was canceled: %w", context.Canceled))), ReasonCanceled},
		{"canceled dns", dnsErr(net.DNSError{Err: "operation was canceled", UnwrapErr: context.Canceled}), ReasonCanceled},
		// Credentials: the token endpoint's own failure never reads as the
		// upstream's; only a cancellation beats it.
		{"credentials", ErrCredentials, ReasonCredentials},
		{"credentials wrapping refused", fmt.Errorf("%w: token endpoint: %w", ErrCredentials,
			opErr("dial", sysErr("connect", syscall.ECONNREFUSED))), ReasonCredentials},
		{"credentials wrapping deadline", fmt.Errorf("%w: %w", ErrCredentials, context.DeadlineExceeded), ReasonCredentials},
		{"credentials wrapping tls", fmt.Errorf("%w: %w", ErrCredentials, &tls.CertificateVerificationError{Err: x509Unknown}), ReasonCredentials},
		{"credentials wrapping dns", fmt.Errorf("%w: %w", ErrCredentials, dnsErr(net.DNSError{Err: "no such host", IsNotFound: true})), ReasonCredentials},
		{"canceled beats credentials", fmt.Errorf("%w: %w", ErrCredentials, context.Canceled), ReasonCanceled},
		// Overloaded: the proxy's own memory budget kept the answer out;
		// whatever else the chain says (the attempt's deadline ended the
		// wait, the caller went away) is the proxy's side too.
		{"overloaded", ErrOverloaded, ReasonOverloaded},
		{"overloaded wrapped", fmt.Errorf("the upstream's response was not buffered: %w: %w", ErrOverloaded,
			errors.New("limit: the memory budget (max_inflight_bytes) is exhausted")), ReasonOverloaded},
		{"overloaded beats timeout", &TimeoutError{Limit: "attempt", Err: ErrOverloaded}, ReasonOverloaded},
		{"overloaded beats canceled", errors.Join(context.Canceled, ErrOverloaded), ReasonOverloaded},
		{"overloaded beats reset", fmt.Errorf("%w: %w", ErrOverloaded, errResetForTest), ReasonOverloaded},
		// Anything else.
		{"unknown", errors.New("something odd"), ReasonNetwork},
		{"unknown wrapped", urlErr(errors.New("net/http: HTTP/1.x transport connection broken: malformed HTTP response")), ReasonNetwork},
		{"net closed", urlErr(opErr("read", net.ErrClosed)), ReasonNetwork},
		{"not a timeout", urlErr(notTimeout{}), ReasonNetwork},
		{"other errno", urlErr(opErr("dial", sysErr("socket", syscall.EMFILE))), ReasonNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(0, tt.err)
			want := Classification{Outcome: Retryable, Reason: tt.want}
			if got != want {
				t.Errorf("Classify(0, %v) = %+v, want %+v", tt.err, got, want)
			}
			// The status never matters once there is an error.
			if got200 := Classify(200, tt.err); got200 != want {
				t.Errorf("Classify(200, %v) = %+v, want %+v", tt.err, got200, want)
			}
		})
	}
}

func TestClassifyResponseTooLarge(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"bare", ErrResponseTooLarge},
		{"wrapped", fmt.Errorf("read body of 13 MiB: %w", ErrResponseTooLarge)},
		{"inside url.Error", urlErr(ErrResponseTooLarge)},
		{"beats timeout", &TimeoutError{Limit: "attempt", Err: ErrResponseTooLarge}},
		{"joined with eof", errors.Join(io.EOF, ErrResponseTooLarge)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := Classification{Outcome: Permanent, Reason: ReasonResponseTooLarge}
			if got := Classify(200, tt.err); got != want {
				t.Errorf("Classify(200, %v) = %+v, want %+v", tt.err, got, want)
			}
		})
	}
}

// No error ever classifies as Permanent except ErrResponseTooLarge, and
// none as Success or Rejected.
func TestClassifyErrorNeverPermanentByDefault(t *testing.T) {
	errs := []error{
		errors.New("x"), io.ErrClosedPipe, net.ErrClosed, os.ErrNotExist, os.ErrPermission,
		&net.AddrError{Err: "missing port", Addr: "x"}, net.UnknownNetworkError("udp9"),
		&net.ParseError{Type: "IP address", Text: "x"}, syscall.EACCES, syscall.EINVAL,
	}
	for _, err := range errs {
		t.Run(err.Error(), func(t *testing.T) {
			if got := Classify(0, err); got.Outcome != Retryable {
				t.Errorf("Classify(0, %v) = %+v, want Retryable", err, got)
			}
		})
	}
}

func TestTimeoutErrorMethods(t *testing.T) {
	tests := []struct {
		err  *TimeoutError
		want string
	}{
		{&TimeoutError{Limit: "connect"}, "connect timeout"},
		{&TimeoutError{Limit: "header", Err: context.DeadlineExceeded}, "header timeout: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !tt.err.Timeout() {
				t.Error("Timeout() = false, want true")
			}
			if !errors.Is(tt.err, tt.err.Err) && tt.err.Err != nil {
				t.Errorf("errors.Is(%v, %v) = false", tt.err, tt.err.Err)
			}
			wrapped := urlErr(tt.err)
			if te, ok := errors.AsType[*TimeoutError](wrapped); !ok || te != tt.err {
				t.Errorf("errors.AsType[*TimeoutError](%v) = %v, %v", wrapped, te, ok)
			}
			if ue, ok := wrapped.(*url.Error); !ok || !ue.Timeout() {
				t.Error("url.Error wrapping a TimeoutError does not report Timeout()")
			}
		})
	}
}

// timeoutOnly is a net.Error that times out, with no other identity.
type timeoutOnly struct{}

func (timeoutOnly) Error() string   { return "some timeout" }
func (timeoutOnly) Timeout() bool   { return true }
func (timeoutOnly) Temporary() bool { return true }

// notTimeout is a net.Error that does not time out.
type notTimeout struct{}

func (notTimeout) Error() string   { return "not a timeout" }
func (notTimeout) Timeout() bool   { return false }
func (notTimeout) Temporary() bool { return false }
