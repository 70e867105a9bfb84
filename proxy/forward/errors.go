package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// transportError turns an error of the HTTP client (or of reading the
// response body) into Attempt.Err, so that policy.Classify can name the
// reason exactly:
//
//   - a dial the SSRF guard refused: *problem.Error, code BlockedAddress,
//     matching ErrBlockedAddress (rejected, never retried);
//   - parent canceled (the caller went away): an error matching
//     context.Canceled;
//   - the whole-attempt limit ran out (or parent's deadline did):
//     *policy.TimeoutError{Limit: "attempt"};
//   - the TCP connect or TLS handshake limit: *policy.TimeoutError{Limit:
//     "connect"};
//   - the response-header limit: *policy.TimeoutError{Limit: "header"};
//   - anything else (refused, reset, DNS, TLS, EOF) unchanged.
//
// The *url.Error wrapper of net/http is removed first: its text carries the
// upstream URL, whose query may hold secrets, and Attempt.Err is logged and
// stored in attempt records.
func transportError(parent, attemptCtx context.Context, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if be, ok := errors.AsType[*blockedError](err); ok {
		return &problem.Error{
			Code: problem.BlockedAddress,
			Detail: "the endpoint's address is not allowed: not a public address, not in its " +
				"allowed_networks, a cloud metadata address, or not the endpoint's port",
			Err: be,
		}
	}
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		if !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: %w", context.Canceled, err)
		}
		return err
	case attemptCtx.Err() != nil:
		return &policy.TimeoutError{Limit: "attempt", Err: err}
	case isConnectTimeout(err):
		return &policy.TimeoutError{Limit: "connect", Err: err}
	case isHeaderTimeout(err):
		return &policy.TimeoutError{Limit: "header", Err: err}
	}
	return err
}

// isConnectTimeout reports a dial that ran out of net.Dialer.Timeout, or a
// TLS handshake that ran out of Transport.TLSHandshakeTimeout.
func isConnectTimeout(err error) bool {
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" && op.Timeout() {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout() && strings.Contains(err.Error(), "TLS handshake timeout")
}

// isHeaderTimeout reports the transport's ResponseHeaderTimeout running out
// ("net/http: timeout awaiting response headers", or the "http2:" form).
func isHeaderTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout() && strings.Contains(err.Error(), "timeout awaiting response headers")
}
