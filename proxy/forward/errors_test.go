package forward

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// timeoutErr is a net.Error that timed out, with the given message.
type timeoutErr string

func (e timeoutErr) Error() string { return string(e) }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestTransportError(t *testing.T) {
	urlErr := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://up.example/x?api_key=secret", Err: err}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), 0)
	defer cancel2()
	live := context.Background()
	tests := []struct {
		name            string
		parent, attempt context.Context
		err             error
		reason          string
		check           func(error) bool
	}{
		{"dial timeout", live, live,
			urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr("i/o timeout")}),
			policy.ReasonConnectTimeout, nil},
		{"TLS handshake timeout", live, live, urlErr(timeoutErr("net/http: TLS handshake timeout")),
			policy.ReasonConnectTimeout, nil},
		{"HTTP/1 header timeout", live, live, urlErr(timeoutErr("net/http: timeout awaiting response headers")),
			policy.ReasonHeaderTimeout, nil},
		{"HTTP/2 header timeout", live, live, urlErr(timeoutErr("http2: timeout awaiting response headers")),
			policy.ReasonHeaderTimeout, nil},
		{"attempt limit wins over the dial's own timeout", live, expired,
			urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr("i/o timeout")}),
			policy.ReasonAttemptTimeout, nil},
		{"attempt limit during the body read", live, expired, context.DeadlineExceeded,
			policy.ReasonAttemptTimeout, nil},
		{"caller canceled", canceled, canceled, urlErr(io.ErrUnexpectedEOF), policy.ReasonCanceled,
			func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"read timeout is not a connect timeout", live, live,
			&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr("i/o timeout")},
			policy.ReasonAttemptTimeout, func(err error) bool {
				_, ok := errors.AsType[*policy.TimeoutError](err)
				return !ok
			}},
		{"another dial error passes unchanged", live, live,
			urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{}}), policy.ReasonNetwork, nil},
		{"reset passes unchanged", live, live,
			urlErr(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), policy.ReasonReset, nil},
		{"blocked dial", live, live,
			urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: &blockedError{addr: "10.0.0.1:443", reason: errMetadata}}),
			"", func(err error) bool {
				pe, ok := errors.AsType[*problem.Error](err)
				_, isOp := errors.AsType[*net.OpError](err)
				return ok && pe.Code == problem.BlockedAddress && errors.Is(err, ErrBlockedAddress) && !isOp
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := transportError(tt.parent, tt.attempt, tt.err)
			if tt.reason != "" {
				if c := policy.Classify(0, got); c.Reason != tt.reason {
					t.Errorf("Classify(%v) = %+v, want %s", got, c, tt.reason)
				}
			}
			if tt.check != nil && !tt.check(got) {
				t.Errorf("transportError = %#v, unexpected shape", got)
			}
			if strings.Contains(got.Error(), "api_key") {
				t.Errorf("%q carries the URL", got)
			}
		})
	}
}
