// Package redact hides secrets on every way out of the proxy (contract §7):
// the status document, dead letters and their Salesforce records, logs and
// the CLI. It is pure: no I/O, no state beyond the prepared Rules, safe for
// concurrent use.
//
// What is hidden:
//
//   - header values of Authorization, Proxy-Authorization (RFC 9110 §11.6.2,
//     §11.7.2), Cookie and Set-Cookie (RFC 6265 §4), always; plus the
//     endpoint's redact.headers and the names of its injected headers
//     (config.Endpoint.Headers), whose values are credentials;
//   - values of the endpoint's redact.query parameters, in query strings and
//     in application/x-www-form-urlencoded bodies;
//   - values at the endpoint's redact.json_fields dot paths in JSON bodies;
//   - Bearer and Basic credentials and redacted query parameters in free
//     text such as error messages (Text).
//
// Every hidden value is replaced by Mask; names, key order, whitespace and
// every other byte stay as they were, so an admin comparing bodies sees what
// was sent, minus the secrets.
package redact

import (
	"net/http"
	"slices"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// Mask replaces every redacted value. In JSON it is written as the string
// "[REDACTED]"; in headers, queries, forms and text as the bare bytes.
const Mask = "[REDACTED]"

// Rules is one endpoint's redaction rules, prepared once by New (canonical
// header names, parsed JSON paths) and then read-only: safe for concurrent
// use. A nil *Rules is valid and hides only the fixed headers of contract §7
// (and Bearer/Basic credentials in Text), for places where no endpoint is
// known.
type Rules struct {
	// headers are canonical header names (http.CanonicalHeaderKey) to hide
	// on top of the fixed list.
	headers map[string]struct{}
	// query are query and form parameter names, compared after
	// percent-decoding the name, case-sensitively.
	query map[string]struct{}
	// queryNames are the keys of query in ascending order, for Text.
	queryNames []string
	// paths are the JSON field paths, each split at '.'; never empty.
	paths [][]string
}

// New prepares the rules of one endpoint: r is its redact configuration
// (config.Redact, contract §10 `redact:`), injected the names of the headers the
// proxy injects upstream for it (the keys of config.Endpoint.Headers), whose
// values are credentials too. Header names are compared case-insensitively
// (RFC 9110 §5.1), query names and JSON keys exactly. Empty names and paths
// (which config validation refuses) are ignored. New never returns nil.
func New(r config.Redact, injected []string) *Rules {
	rules := &Rules{
		headers: make(map[string]struct{}, len(r.Headers)+len(injected)),
		query:   make(map[string]struct{}, len(r.Query)),
	}
	for _, h := range append(append([]string(nil), r.Headers...), injected...) {
		if h != "" {
			rules.headers[http.CanonicalHeaderKey(h)] = struct{}{}
		}
	}
	for _, q := range r.Query {
		if _, dup := rules.query[q]; q != "" && !dup {
			rules.query[q] = struct{}{}
			rules.queryNames = append(rules.queryNames, q)
		}
	}
	slices.Sort(rules.queryNames)
	for _, f := range r.JSONFields {
		if f != "" {
			rules.paths = append(rules.paths, strings.Split(f, "."))
		}
	}
	return rules
}

// fixedHeader reports whether a canonical header name is one contract §7 always
// hides.
func fixedHeader(canonical string) bool {
	switch canonical {
	case "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie":
		return true
	}
	return false
}

// HidesHeader reports whether the value of the header called name (any
// case) is hidden by these rules.
func (r *Rules) HidesHeader(name string) bool {
	c := http.CanonicalHeaderKey(name)
	if fixedHeader(c) {
		return true
	}
	if r == nil {
		return false
	}
	_, ok := r.headers[c]
	return ok
}

// Header returns a copy of h in which every value of a hidden header is
// Mask; the names stay (with their number of values), so an admin sees that
// the header was sent. Names are matched case-insensitively, so a
// non-canonical key set directly in the map is hidden too. h is not
// modified; a nil h gives nil.
func (r *Rules) Header(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for name, values := range h {
		if !r.HidesHeader(name) {
			out[name] = append([]string(nil), values...)
			continue
		}
		masked := make([]string, len(values))
		for i := range masked {
			masked[i] = Mask
		}
		out[name] = masked
	}
	return out
}
