package credentials

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"golang.org/x/oauth2"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Error is a failure to obtain an endpoint's OAuth 2.0 access token from
// its token endpoint (unreachable, too slow, an error answer (RFC 6749
// §5.2), or an answer that is not a usable token), or its AWS credentials
// from the standard AWS credential chain. It matches
// policy.ErrCredentials, so policy.Classify makes the attempt Retryable
// "credentials": nothing reached the upstream, and a later attempt may get
// a token. Its text holds the endpoint, the token endpoint's status and
// RFC 6749 error code, or the transport's error without the token URL —
// never a token, a client secret or a response body.
type Error struct {
	// Endpoint is the endpoint's name.
	Endpoint string
	// Credential names what could not be obtained; "" means "oauth2 token".
	Credential string
	// Status is the token endpoint's HTTP status; 0 when it did not answer.
	Status int
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	what := e.Credential
	if what == "" {
		what = "oauth2 token"
	}
	return what + " for endpoint " + e.Endpoint + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is policy.ErrCredentials.
func (e *Error) Is(target error) bool { return target == policy.ErrCredentials }

// ConfigError is a credential the configuration names that could not be
// read before any value of it was ever loaded: an environment variable unset
// or empty, a file missing, unreadable or malformed (config.Load checks
// them all at start, so this means one changed since). A file that turns
// bad after it was loaded keeps its previous value instead. Its text names
// the key and the variable or path, never the value.
type ConfigError struct {
	Err error
}

// Error implements error.
func (e *ConfigError) Error() string { return "credentials: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// QueryError is a request whose query aws_sigv4 cannot sign as sent: one
// url.ParseQuery does not read losslessly (a ';' separator, a bad
// %-escape). The signer would drop or alter those parts, so the attempt is
// refused instead (the caller's request is at fault; nothing was sent).
type QueryError struct {
	Err error
}

// Error implements error.
func (e *QueryError) Error() string { return "credentials: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *QueryError) Unwrap() error { return e.Err }

// maxErrorCode bounds the RFC 6749 error code quoted in an Error.
const maxErrorCode = 64

// tokenError turns what the oauth2 client returned into an *Error: the
// *url.Error wrapper (whose text carries the token URL) is removed, and an
// *oauth2.RetrieveError becomes its status and error code only, since its
// text quotes the response body.
func tokenError(endpoint string, err error) *Error {
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		msg := "the token endpoint answered " + strconv.Itoa(status)
		if code := re.ErrorCode; code != "" {
			if len(code) > maxErrorCode {
				code = code[:maxErrorCode]
			}
			msg += " with error " + strconv.Quote(code)
		}
		return &Error{Endpoint: endpoint, Status: status, Err: errors.New(msg)}
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = &limitError{err}
	}
	return &Error{Endpoint: endpoint, Err: err}
}

// limitError says a token request ran out of time, keeping the cause.
type limitError struct{ err error }

func (e *limitError) Error() string {
	return "no answer from the token endpoint in time: " + e.err.Error()
}
func (e *limitError) Unwrap() error { return e.err }
