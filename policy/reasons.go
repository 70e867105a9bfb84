package policy

// The reason words of Classification.Reason. They are stable: attempt
// records, logs, metrics labels and dead letters carry them, so a word is
// never renamed, only added. Each names the single rule of Classify that
// produced it (contract §2).
const (
	// ReasonStatus2xx: the upstream answered 200–299 (Success).
	ReasonStatus2xx = "status_2xx"
	// ReasonStatus1xx: an informational 100–199 reached the proxy as the
	// final answer (Permanent).
	ReasonStatus1xx = "status_1xx"
	// ReasonStatus3xx: a redirect 300–399; the proxy never follows one
	// (Permanent).
	ReasonStatus3xx = "status_3xx"
	// ReasonStatus408: 408 Request Timeout (Retryable, RFC 9110 §15.5.9).
	ReasonStatus408 = "status_408"
	// ReasonStatus429: 429 Too Many Requests (Retryable, RFC 6585 §4); never
	// counts toward the breaker (contract §6).
	ReasonStatus429 = "status_429"
	// ReasonStatus4xx: any other 400–499 (Permanent).
	ReasonStatus4xx = "status_4xx"
	// ReasonStatus5xx: 500–599 except 501 and 505 (Retryable).
	ReasonStatus5xx = "status_5xx"
	// ReasonStatus501: 501 Not Implemented; retrying cannot help (Permanent).
	ReasonStatus501 = "status_501"
	// ReasonStatus505: 505 HTTP Version Not Supported (Permanent).
	ReasonStatus505 = "status_505"
	// ReasonStatusInvalid: a status outside 100–599, including 0 with no
	// error (Permanent: nothing in RFC 9110 makes it worth repeating).
	ReasonStatusInvalid = "status_invalid"

	// ReasonDNS: the upstream's name did not resolve, of any kind: not
	// found, resolver timeout, temporary failure, server misbehaving.
	ReasonDNS = "dns"
	// ReasonConnectRefused: the TCP connect was refused (ECONNREFUSED).
	ReasonConnectRefused = "connect_refused"
	// ReasonUnreachable: no route to the upstream (EHOSTUNREACH,
	// ENETUNREACH, EHOSTDOWN, ENETDOWN).
	ReasonUnreachable = "unreachable"
	// ReasonConnectTimeout: the connect limit (policy.connect_timeout) ran
	// out, or a dial timed out.
	ReasonConnectTimeout = "connect_timeout"
	// ReasonTLS: the TLS handshake failed: not TLS at all, untrusted or
	// invalid certificate, wrong host name, an alert.
	ReasonTLS = "tls"
	// ReasonReset: the connection was reset or broken (ECONNRESET, EPIPE,
	// ECONNABORTED).
	ReasonReset = "reset"
	// ReasonEOF: the upstream closed the connection without a (complete)
	// answer (io.EOF, io.ErrUnexpectedEOF).
	ReasonEOF = "eof"
	// ReasonHeaderTimeout: the response-header limit
	// (policy.header_timeout) ran out.
	ReasonHeaderTimeout = "header_timeout"
	// ReasonAttemptTimeout: the whole-attempt limit
	// (policy.attempt_timeout) ran out, or any other deadline or timeout.
	ReasonAttemptTimeout = "attempt_timeout"
	// ReasonCanceled: the attempt was canceled (context.Canceled), for
	// example by shutdown; no answer, so Retryable, but it says nothing about
	// the upstream and never counts toward the breaker.
	ReasonCanceled = "canceled"
	// ReasonCredentials: the endpoint's upstream credentials could not be
	// obtained for this attempt — its OAuth 2.0 token endpoint was down,
	// slow or refused the client (an error matching ErrCredentials). Nothing
	// reached the upstream; a later attempt may get a token, so Retryable.
	ReasonCredentials = "credentials"
	// ReasonNetwork: any other transport failure. An unknown failure is no
	// answer, hence Retryable.
	ReasonNetwork = "network"
	// ReasonResponseTooLarge: the body exceeded max_response_bytes
	// (Permanent, contract §2).
	ReasonResponseTooLarge = "response_too_large"
	// ReasonOverloaded: the upstream answered, but the proxy's own memory
	// budget (max_inflight_bytes, or the organisation's share of it) had no
	// room to buffer the answer (an error matching ErrOverloaded). No
	// answer was kept, so Retryable; but it says nothing about the upstream
	// and never counts toward the breaker (contract §6, §10).
	ReasonOverloaded = "overloaded"
)
