package policy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
)

// Classify decides the outcome class of one attempt and the reason word for
// it (contract §2; the words are the Reason* constants).
//
// status is the upstream's HTTP status code, 0 when no response arrived. err
// is what the transport or the body read returned, nil when a whole response
// was read. A non-nil err decides alone, whatever status says: a response
// whose body broke off is no answer (Retryable), and one over
// max_response_bytes is Permanent.
//
// With err == nil, by status: 200–299 Success; 500–599 Retryable except 501
// and 505; 408 and 429 Retryable; every other status (other 4xx, 501, 505,
// 1xx, 3xx — redirects are never followed — and anything outside 100–599)
// Permanent.
//
// With err != nil, in this order, looking through every wrapping
// (*url.Error, *net.OpError, *os.SyscallError, fmt %w chains, errors.Join):
//
//   - ErrResponseTooLarge: Permanent "response_too_large".
//   - ErrOverloaded: Retryable "overloaded" (the proxy's memory budget had
//     no room for the answer; whatever else the chain holds, e.g. the
//     attempt's deadline ending the wait, is the proxy's own limit too).
//   - *TimeoutError: Retryable "<Limit>_timeout" (connect, header, attempt).
//   - context.Canceled: Retryable "canceled".
//   - ErrCredentials: Retryable "credentials" (the upstream was not called;
//     whatever failed on the way to a token is inside).
//   - *net.DNSError of any kind (not found, timeout, temporary, server
//     misbehaving): Retryable "dns".
//   - TLS: tls.RecordHeaderError, http.ErrSchemeMismatch (what http.Client
//     makes of a plain-HTTP answer to a TLS client), tls.AlertError,
//     *tls.CertificateVerificationError, *tls.ECHRejectionError, the x509
//     verification errors, and a TLS alert sent or received (the
//     *net.OpError "local error"/"remote error" crypto/tls returns):
//     Retryable "tls".
//   - syscall.ECONNREFUSED: Retryable "connect_refused".
//   - EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, ENETDOWN: Retryable "unreachable".
//   - ECONNRESET, EPIPE, ECONNABORTED: Retryable "reset".
//   - io.EOF, io.ErrUnexpectedEOF: Retryable "eof".
//   - context.DeadlineExceeded, os.ErrDeadlineExceeded, or any error whose
//     Timeout() reports true: Retryable "connect_timeout" when a
//     *net.OpError with Op "dial" is in the chain, else "attempt_timeout".
//   - an error message in the chain that starts "tls: " or "x509: " (crypto
//     errors without a type of their own): Retryable "tls".
//   - anything else: Retryable "network" — an unknown transport failure is
//     no answer, so it is never Permanent by default.
//
// Classify never returns Rejected: refusals before dispatch (an address the
// SSRF guard blocks, for instance) are the caller's to map first.
func Classify(status int, err error) Classification {
	if err != nil {
		return classifyError(err)
	}
	return classifyStatus(status)
}

// classifyStatus applies the status rules of contract §2.
func classifyStatus(status int) Classification {
	switch {
	case status >= 200 && status <= 299:
		return Classification{Outcome: Success, Reason: ReasonStatus2xx}
	case status == http.StatusNotImplemented:
		return Classification{Outcome: Permanent, Reason: ReasonStatus501}
	case status == http.StatusHTTPVersionNotSupported:
		return Classification{Outcome: Permanent, Reason: ReasonStatus505}
	case status >= 500 && status <= 599:
		return Classification{Outcome: Retryable, Reason: ReasonStatus5xx}
	case status == http.StatusRequestTimeout:
		return Classification{Outcome: Retryable, Reason: ReasonStatus408}
	case status == http.StatusTooManyRequests:
		return Classification{Outcome: Retryable, Reason: ReasonStatus429}
	case status >= 400 && status <= 499:
		return Classification{Outcome: Permanent, Reason: ReasonStatus4xx}
	case status >= 300 && status <= 399:
		return Classification{Outcome: Permanent, Reason: ReasonStatus3xx}
	case status >= 100 && status <= 199:
		return Classification{Outcome: Permanent, Reason: ReasonStatus1xx}
	default:
		return Classification{Outcome: Permanent, Reason: ReasonStatusInvalid}
	}
}

// classifyError applies the error rules of Classify, in its documented order.
func classifyError(err error) Classification {
	retryable := func(reason string) Classification {
		return Classification{Outcome: Retryable, Reason: reason}
	}
	if errors.Is(err, ErrResponseTooLarge) {
		return Classification{Outcome: Permanent, Reason: ReasonResponseTooLarge}
	}
	if errors.Is(err, ErrOverloaded) {
		return retryable(ReasonOverloaded)
	}
	if te, ok := errors.AsType[*TimeoutError](err); ok {
		return retryable(timeoutReason(te.Limit))
	}
	switch {
	case errors.Is(err, context.Canceled):
		return retryable(ReasonCanceled)
	case errors.Is(err, ErrCredentials):
		return retryable(ReasonCredentials)
	case isDNSError(err):
		return retryable(ReasonDNS)
	case isTLSError(err):
		return retryable(ReasonTLS)
	case errors.Is(err, syscall.ECONNREFUSED):
		return retryable(ReasonConnectRefused)
	case isAny(err, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.ENETDOWN):
		return retryable(ReasonUnreachable)
	case isAny(err, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED):
		return retryable(ReasonReset)
	case isAny(err, io.EOF, io.ErrUnexpectedEOF):
		return retryable(ReasonEOF)
	case isTimeout(err) && isDial(err):
		return retryable(ReasonConnectTimeout)
	case isTimeout(err):
		return retryable(ReasonAttemptTimeout)
	case hasTLSMessage(err):
		return retryable(ReasonTLS)
	default:
		return retryable(ReasonNetwork)
	}
}

// timeoutReason maps a TimeoutError's Limit to its reason word; an unknown
// limit is the whole-attempt one, so reasons stay a closed set.
func timeoutReason(limit string) string {
	switch limit {
	case "connect":
		return ReasonConnectTimeout
	case "header":
		return ReasonHeaderTimeout
	default:
		return ReasonAttemptTimeout
	}
}

// walk calls visit on err and on everything it wraps, depth first, through
// Unwrap() error and Unwrap() []error, and reports whether visit ever
// returned true.
func walk(err error, visit func(error) bool) bool {
	for err != nil {
		if visit(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, visit) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// isAny reports whether errors.Is(err, t) holds for any target t.
func isAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// isDNSError reports a *net.DNSError anywhere in the chain.
func isDNSError(err error) bool {
	_, ok := errors.AsType[*net.DNSError](err)
	return ok
}

// isTLSError reports a typed crypto/tls or crypto/x509 failure anywhere in
// the chain, or the TLS alert wrapping crypto/tls uses on a TCP connection.
func isTLSError(err error) bool {
	if errors.Is(err, http.ErrSchemeMismatch) {
		return true
	}
	return walk(err, func(e error) bool {
		switch e := e.(type) {
		case tls.RecordHeaderError, tls.AlertError, *tls.CertificateVerificationError,
			*tls.ECHRejectionError,
			x509.UnknownAuthorityError, x509.HostnameError, x509.CertificateInvalidError,
			x509.SystemRootsError, x509.ConstraintViolationError,
			x509.UnhandledCriticalExtension, x509.InsecureAlgorithmError:
			return true
		case *net.OpError:
			// crypto/tls reports an alert it received as Op "remote error"
			// and one it sent as Op "local error" (crypto/tls/conn.go).
			return e.Op == "remote error" || e.Op == "local error"
		}
		return false
	})
}

// hasTLSMessage reports an error in the chain whose own message starts with
// "tls: " or "x509: ": crypto/tls and crypto/x509 return many failures as
// plain errors.New/fmt.Errorf values with that prefix.
func hasTLSMessage(err error) bool {
	return walk(err, func(e error) bool {
		msg := e.Error()
		return strings.HasPrefix(msg, "tls: ") || strings.HasPrefix(msg, "x509: ")
	})
}

// isTimeout reports a deadline or an error in the chain whose Timeout()
// reports true (net.Error, *url.Error, net/http's own timeouts).
func isTimeout(err error) bool {
	if isAny(err, context.DeadlineExceeded, os.ErrDeadlineExceeded) {
		return true
	}
	return walk(err, func(e error) bool {
		t, ok := e.(interface{ Timeout() bool })
		return ok && t.Timeout()
	})
}

// isDial reports a *net.OpError for a dial (connect) anywhere in the chain.
func isDial(err error) bool {
	return walk(err, func(e error) bool {
		op, ok := e.(*net.OpError)
		return ok && op.Op == "dial"
	})
}
