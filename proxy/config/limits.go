package config

import "time"

// Limits are the limits that protect every caller from every other (contract
// §10): listener timeouts, connection caps, header limits and the memory
// budget. docs/limits.md says what a caller sees when each is reached.
// A zero value, given or not, means the default.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's line and header fields,
	// on both listeners, from the first byte (or from the end of the
	// previous request on a keep-alive connection). A slow-loris caller's
	// connection is closed when it runs out. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// BodyReadTimeout bounds reading a request body, on both listeners,
	// from the end of its header fields: a body that has not arrived whole
	// by then is answered 408 request-timeout and its connection closed.
	// Default 60s (a 12 MiB body at 200 KB/s).
	BodyReadTimeout time.Duration `yaml:"body_read_timeout"`
	// WriteTimeout bounds writing a response to the caller, on both
	// listeners, from when the proxy starts writing it: a caller that
	// stops reading cannot hold a handler, its connection and the response
	// bytes in the memory budget for longer; the connection is closed.
	// Default 60s (a 12 MiB answer at 200 KB/s).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request, on both listeners, before the proxy closes it. Default 60s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections caps the open connections of the callout listener.
	// At the cap a new connection closes the oldest connection that is idle
	// or has not sent a whole request header yet (500 ms after its
	// accept); while a group holds more connections than
	// MaxConnectionsPerIssuer, only that group's (limit.Listener); when
	// every connection is running a request within its share, the new one
	// waits (in the kernel's accept queue) until one ends. Default 2048.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIssuer is one organisation's (JWT issuer's) share
	// of the callout listener's connections, running its requests or idle
	// after one: when the listener is at MaxConnections and a new
	// connection needs room, the group most over its share loses its idle
	// connection, else its oldest request still receiving its body (cut:
	// 503 overloaded naming the share, connection closed), else its oldest
	// request at its upstream (a write answered 202, a read 503); never a
	// connection of a group within its share. New connections and requests
	// whose token is not verified yet count as one more group. Default 0: a
	// fair share, MaxConnections divided by the number of auth.issuers plus
	// one (that group), at least 1; no share with a single issuer. It
	// reloads (a fair share follows auth.issuers). Contract §10,
	// docs/limits.md.
	MaxConnectionsPerIssuer int `yaml:"max_connections_per_issuer"`
	// AdminMaxConnections caps the admin listener's connections the same
	// way, separately, so the callout listener can never starve /metrics or
	// the admin API. Default 64.
	AdminMaxConnections int `yaml:"admin_max_connections"`
	// MaxHeaderBytes caps a callout request's header fields: the sum over
	// fields of name, value and 4 bytes (": " and CRLF). Past it: 431
	// headers-too-large (problem+json). A header section over twice this
	// size is refused by the HTTP server itself before the proxy sees it
	// (a bare 431, connection closed), which bounds the memory one
	// connection can make the proxy hold. Default 65536 (64 KiB).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxHeaderFields caps the number of header field lines of a callout
	// request. Past it: 431 headers-too-large. Default 100.
	MaxHeaderFields int `yaml:"max_header_fields"`
	// MaxInflightBytes is the memory budget, in bytes, for request and
	// response bodies and request headers held in memory at once, across
	// every callout request of this replica. A request that would pass it
	// waits up to OverloadWait for room, then gets 503 overloaded with
	// Retry-After. Requests needing at most 64 KiB in all may use the whole
	// budget; larger ones only seven eighths of it, so a flood of large
	// bodies never crowds out small callouts. Default 268435456 (256 MiB,
	// for a 1 GiB pod; the Go runtime is also given a soft memory limit of
	// this plus 96 MiB unless GOMEMLIMIT is set).
	MaxInflightBytes int64 `yaml:"max_inflight_bytes"`
	// MaxInflightBytesPerIssuer is one organisation's (JWT issuer's) share
	// of the memory budget, in bytes: while more than half of
	// MaxInflightBytes is held, a request of an organisation that would
	// hold more than this waits up to OverloadWait, then gets 503
	// overloaded naming the share; the other organisations are still
	// served. Default 0: a fair share, MaxInflightBytes divided by the
	// number of auth.issuers (but at least one largest callout,
	// max_request_bytes + max_response_bytes); no share with a single
	// issuer. Contract §10, docs/limits.md.
	MaxInflightBytesPerIssuer int64 `yaml:"max_inflight_bytes_per_issuer"`
	// OverloadWait is how long, in all, a request may wait for room in the
	// memory budget before 503 overloaded. Default 1s.
	OverloadWait time.Duration `yaml:"overload_wait"`
	// AdminLoginFailures is how many failed admin-token checks (admin API
	// 401s, console logins) one source address, and one presented token
	// prefix, may make in an AdminLoginWindow before the next are answered
	// 429 with Retry-After until the window ends. A right token is always
	// accepted. Default 10.
	AdminLoginFailures int `yaml:"admin_login_failures"`
	// AdminLoginWindow is the window failed admin-token checks are counted
	// in, and the longest Retry-After of a throttled one; each source's
	// failures of a window are collapsed into one audit line. Default 1m.
	AdminLoginWindow time.Duration `yaml:"admin_login_window"`
	// AdminLoginSources bounds the source addresses the login throttle
	// remembers, and separately the token prefixes (about 200 bytes each);
	// past it the one counted longest is forgotten. Default 10000.
	AdminLoginSources int `yaml:"admin_login_sources"`
}

// Limits defaults (contract §10, docs/limits.md).
const (
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultBodyReadTimeout     = 60 * time.Second
	DefaultWriteTimeout        = 60 * time.Second
	DefaultIdleTimeout         = 60 * time.Second
	DefaultMaxConnections      = 2048
	DefaultAdminMaxConnections = 64
	DefaultMaxHeaderBytes      = 64 << 10
	DefaultMaxHeaderFields     = 100
	DefaultMaxInflightBytes    = 256 << 20
	DefaultOverloadWait        = time.Second
	DefaultAdminLoginFailures  = 10
	DefaultAdminLoginWindow    = time.Minute
	DefaultAdminLoginSources   = 10000
)

// applyDefaults fills every zero limit with its default.
func (l *Limits) applyDefaults() {
	inherit(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	inherit(&l.BodyReadTimeout, DefaultBodyReadTimeout)
	inherit(&l.WriteTimeout, DefaultWriteTimeout)
	inherit(&l.IdleTimeout, DefaultIdleTimeout)
	inherit(&l.MaxConnections, DefaultMaxConnections)
	inherit(&l.AdminMaxConnections, DefaultAdminMaxConnections)
	inherit(&l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	inherit(&l.MaxHeaderFields, DefaultMaxHeaderFields)
	inherit(&l.MaxInflightBytes, DefaultMaxInflightBytes)
	inherit(&l.OverloadWait, DefaultOverloadWait)
	inherit(&l.AdminLoginFailures, DefaultAdminLoginFailures)
	inherit(&l.AdminLoginWindow, DefaultAdminLoginWindow)
	inherit(&l.AdminLoginSources, DefaultAdminLoginSources)
}

// fairInflightShare fills a zero max_inflight_bytes_per_issuer with the
// fair share of issuers organisations: the budget divided among them, but
// at least one largest callout (largest: max_request_bytes +
// max_response_bytes), so every organisation may always make one. With
// one issuer or none there is nobody to share with: the share stays 0.
func (l *Limits) fairInflightShare(issuers int, largest int64) {
	if issuers > 1 {
		inherit(&l.MaxInflightBytesPerIssuer, max(l.MaxInflightBytes/int64(issuers), largest))
	}
}

// fairConnectionShare fills a zero max_connections_per_issuer with the
// fair share of issuers organisations and the group of requests whose
// token is not verified yet: max_connections divided among them, at least
// 1. With one issuer or none the share stays 0 (none).
func (l *Limits) fairConnectionShare(issuers int) {
	if issuers > 1 {
		inherit(&l.MaxConnectionsPerIssuer, max(l.MaxConnections/(issuers+1), 1))
	}
}

// minInflightBytes is the smallest memory budget accepted: one whole
// request and one whole response of the default 12 MiB.
const minInflightBytes = 24 << 20

// validate checks the limits after defaults: nothing negative, a budget
// that holds at least one largest request and one largest response
// (maxRequest, maxResponse: the policy's max_request_bytes and
// max_response_bytes), and header limits a Salesforce callout fits in.
func (l Limits) validate(col *collector, maxRequest, maxResponse int64) {
	for key, d := range map[string]time.Duration{
		"limits.read_header_timeout": l.ReadHeaderTimeout, "limits.body_read_timeout": l.BodyReadTimeout,
		"limits.idle_timeout": l.IdleTimeout, "limits.overload_wait": l.OverloadWait,
		"limits.write_timeout": l.WriteTimeout, "limits.admin_login_window": l.AdminLoginWindow,
	} {
		if d < 0 {
			col.add(key, "%s is negative", d)
		}
	}
	for _, c := range []struct {
		key  string
		n    int
		hint string
	}{
		{"limits.max_connections", l.MaxConnections, "at least 1 connection is needed"},
		{"limits.admin_max_connections", l.AdminMaxConnections, "at least 1 connection is needed"},
		{"limits.admin_login_failures", l.AdminLoginFailures, "at least 1; leave it out for the default"},
		{"limits.admin_login_sources", l.AdminLoginSources, "at least 1; leave it out for the default"},
	} {
		if c.n < 1 {
			col.add(c.key, "%d: %s", c.n, c.hint)
		}
	}
	if l.MaxHeaderBytes < 4096 {
		col.add("limits.max_header_bytes", "%d: at least 4096 bytes (a Salesforce JWT alone is about 1 KB)", l.MaxHeaderBytes)
	}
	if l.MaxHeaderFields < 16 {
		col.add("limits.max_header_fields", "%d: at least 16 fields (Apex sends about 10)", l.MaxHeaderFields)
	}
	if l.MaxConnectionsPerIssuer < 0 {
		col.add("limits.max_connections_per_issuer", "%d is negative; leave it out for a fair share", l.MaxConnectionsPerIssuer)
	}
	if l.MaxConnections >= 3 && 2*l.MaxConnectionsPerIssuer >= l.MaxConnections {
		col.add("limits.max_connections_per_issuer", "%d is half of limits.max_connections (%d) or more: one organisation "+
			"and the unverified requests at their shares would fill the listener with nobody over a share to cut; "+
			"leave it out for a fair share", l.MaxConnectionsPerIssuer, l.MaxConnections)
	}
	if l.MaxInflightBytesPerIssuer < 0 {
		col.add("limits.max_inflight_bytes_per_issuer", "%d is negative; leave it out for a fair share", l.MaxInflightBytesPerIssuer)
	}
	if need := max(minInflightBytes, maxRequest+maxResponse); l.MaxInflightBytes < need {
		col.add("limits.max_inflight_bytes", "%d bytes: at least %d (max_request_bytes + max_response_bytes, "+
			"and at least 24 MiB) so one largest callout fits", l.MaxInflightBytes, need)
	}
}
