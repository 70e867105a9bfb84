package config

import (
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// EndpointNamePattern is the contract's rule for endpoint names (contract §10).
const EndpointNamePattern = `^[a-z0-9][a-z0-9-]{0,62}$`

var (
	endpointNameRE = regexp.MustCompile(EndpointNamePattern)
	// userIDRE is a Salesforce User id: key prefix 005, 15 or 18 characters.
	userIDRE = regexp.MustCompile(`^005[A-Za-z0-9]{12}([A-Za-z0-9]{3})?$`)
)

// validateEndpoints checks every endpoint, in name order, and sets the
// derived BaseURL and Networks of each one whose url and networks are valid.
func (c *Config) validateEndpoints(col *collector) {
	if len(c.Endpoints) == 0 {
		col.add("endpoints", "at least one endpoint is required")
	}
	for _, name := range c.EndpointNames() {
		key := join("endpoints", name)
		if !endpointNameRE.MatchString(name) {
			col.add(key, "name must match %s", EndpointNamePattern)
		}
		e := c.Endpoints[name]
		if e == nil {
			col.add(key, "must be a mapping with at least url")
			continue
		}
		e.BaseURL = validateEndpointURL(col, key+".url", e.URL)
		if e.Owner != "" && !userIDRE.MatchString(e.Owner) {
			col.add(key+".owner", "must be a Salesforce user id: 15 or 18 letters and digits starting with 005")
		}
		if e.Idempotency != IdempotencyHonoured && e.Idempotency != IdempotencyIgnored {
			col.add(key+".idempotency", "%q must be honoured or ignored", e.Idempotency)
		}
		switch e.CompletionEvents {
		case "", CompletionEventsAll, CompletionEventsDeadLetters, CompletionEventsNone:
		default:
			col.add(key+".completion_events", "%q must be all, dead_letters or none", e.CompletionEvents)
		}
		e.Networks = parseNetworks(col, key+".allowed_networks", e.AllowedNetworks)
		for i, iss := range e.AllowedIssuers {
			if !slices.Contains(c.Auth.Issuers, iss) {
				col.add(index(key+".allowed_issuers", i), "%q is not one of auth.issuers", iss)
			}
		}
		c.validateEndpointLimits(col, key, e)
		e.Headers = validateHeaders(col, key+".headers", e.Headers)
		validateCredentials(col, key, e)
		validateSigning(col, key, e)
		validateRedact(col, key+".redact", &e.Redact)
	}
}

// validateEndpointURL returns the parsed base URL, or nil after recording
// why it is unusable. The URL is not quoted back (it might carry user info).
func validateEndpointURL(col *collector, key, raw string) *url.URL {
	if raw == "" {
		col.add(key, "required: the upstream base URL, e.g. https://api.example.com/v2")
		return nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		col.add(key, "is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		col.add(key, "scheme must be http or https")
	case u.Hostname() == "" || u.Opaque != "":
		col.add(key, "must be an absolute URL with a host, e.g. https://api.example.com/v2")
	case u.User != nil:
		col.add(key, "must not contain user info; send credentials with endpoint headers")
	case u.RawQuery != "" || u.ForceQuery:
		col.add(key, "must not have a query; the caller's query is used")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		col.add(key, "must not have a fragment")
	case u.Port() != "" && !validPort(u.Port()):
		col.add(key, "port must be 1-65535")
	default:
		return u
	}
	return nil
}

func validPort(p string) bool {
	n := 0
	for _, r := range p {
		n = n*10 + int(r-'0')
		if n > 65535 {
			return false
		}
	}
	return n > 0
}

// parseNetworks parses CIDRs, refusing ones with host bits set: 10.0.0.1/8
// is more likely a mistake than a way to write 10.0.0.0/8.
func parseNetworks(col *collector, key string, cidrs []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(cidrs))
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			col.add(index(key, i), "%q is not a CIDR (e.g. 10.20.0.0/16, 192.0.2.7/32)", s)
		case p != p.Masked():
			col.add(index(key, i), "%q has host bits set; the network is %s", s, p.Masked())
		default:
			out = append(out, p)
		}
	}
	return out
}

// validateEndpointLimits reports negative overrides and effective connect
// or header timeouts over the effective attempt timeout. A pair neither of
// which the endpoint overrides is policy's, reported under policy.
func (c *Config) validateEndpointLimits(col *collector, key string, e *Endpoint) {
	const hint = "must not be negative; leave it out to inherit policy.%s"
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"connect_timeout", e.ConnectTimeout}, {"header_timeout", e.HeaderTimeout},
		{"attempt_timeout", e.AttemptTimeout}, {"breaker_probe_interval", e.BreakerProbeInterval},
	} {
		if d.v < 0 {
			col.add(key+"."+d.name, hint, d.name)
		}
	}
	if e.BreakerFailures < 0 {
		col.add(key+".breaker_failures", hint, "breaker_failures")
	}
	if p := e.Breaker.Partition; p != "" && p != BreakerPartitionOrganisation && p != BreakerPartitionEndpoint {
		col.add(key+".breaker.partition", "must be organisation (the default) or endpoint, not %q", p)
	}
	if e.MaxBacklogItems < 0 || e.MaxBacklogBytes < 0 {
		col.add(key+".max_backlog_items", "max_backlog_items and max_backlog_bytes must not be negative; leave them out to inherit policy")
	}
	if e.MaxBacklogItemsPerIssuer < 0 || e.MaxBacklogBytesPerIssuer < 0 {
		col.add(key+".max_backlog_items_per_issuer", "max_backlog_items_per_issuer and max_backlog_bytes_per_issuer must not be negative; leave them out for a fair share")
	}
	if e.MaxConcurrency < 0 {
		col.add(key+".max_concurrency", "must not be negative; 0 means the dispatcher's default")
	}
	if e.Shards < 0 || e.Shards > MaxShards {
		col.add(key+".shards", "must be 1 to %d (0 or absent: 1)", MaxShards)
	}
	p := c.Policy
	if e.ConnectTimeout == p.ConnectTimeout && e.HeaderTimeout == p.HeaderTimeout && e.AttemptTimeout == p.AttemptTimeout {
		return
	}
	checkLimits(col, key, e.ConnectTimeout, e.HeaderTimeout, e.AttemptTimeout)
}

// validateHeaders checks injected header names and refs and returns the
// headers keyed by canonical name (http.CanonicalHeaderKey).
func validateHeaders(col *collector, key string, headers map[string]SecretRef) map[string]SecretRef {
	if headers == nil {
		return nil
	}
	out := make(map[string]SecretRef, len(headers))
	for _, name := range sortedKeys(headers) {
		hk := join(key, name)
		canonical := http.CanonicalHeaderKey(name)
		switch {
		case !isToken(name):
			col.add(hk, "is not a valid header name (RFC 9110 §5.6.2 token)")
		case isHopByHop(canonical):
			col.add(hk, "is a hop-by-hop header (RFC 9110 §7.6.1); it is never forwarded")
		case canonical == "Host" || canonical == "Content-Length" || canonical == "Idempotency-Key":
			col.add(hk, "is set by the proxy and cannot be configured")
		}
		if _, dup := out[canonical]; dup {
			col.add(hk, "repeats header %s (header names are case-insensitive)", canonical)
		}
		ref := headers[name]
		if (ref.Env == "") == (ref.File == "") {
			col.add(hk, "set exactly one of env and file")
		}
		out[canonical] = ref
	}
	return out
}

// isHopByHop reports the hop-by-hop headers of RFC 9110 §7.6.1 (and the
// obsolete ones net/http/httputil.ReverseProxy also removes).
func isHopByHop(canonical string) bool {
	switch canonical {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// isToken reports whether s is an RFC 9110 §5.6.2 token:
// 1*( "!#$%&'*+-.^_`|~" / DIGIT / ALPHA ).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// validateRedact checks the names to redact and canonicalises header names.
func validateRedact(col *collector, key string, r *Redact) {
	for i, h := range r.Headers {
		if !isToken(h) {
			col.add(index(key+".headers", i), "is not a valid header name (RFC 9110 §5.6.2 token)")
			continue
		}
		r.Headers[i] = http.CanonicalHeaderKey(h)
	}
	for i, q := range r.Query {
		if q == "" {
			col.add(index(key+".query", i), "must not be empty")
		}
	}
	for i, f := range r.JSONFields {
		if f == "" || slices.Contains(strings.Split(f, "."), "") {
			col.add(index(key+".json_fields", i), "%q is not a dot-separated path such as card.number", f)
		}
	}
}
