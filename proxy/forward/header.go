package forward

import (
	"maps"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// hopByHop lists the header fields that describe one connection, not the
// message, and are never forwarded in either direction (RFC 9110 §7.6.1;
// RFC 9113 §8.2.2 for the HTTP/2 list; the same list as Go's
// net/http/httputil.ReverseProxy). Names are canonical (textproto).
//
//   - Te is dropped entirely, `TE: trailers` included: the proxy buffers the
//     response and never forwards trailers, so announcing trailer support
//     upstream would be a promise it cannot keep.
//   - Http2-Settings belongs to an `Upgrade: h2c` request on the caller's
//     connection (RFC 7540 §3.2.1) and means nothing without that upgrade.
var hopByHop = []string{
	"Connection",
	"Proxy-Connection", // non-standard, still sent by libcurl
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
	"Http2-Settings",
}

// callerOnly lists request header fields that are addressed to the proxy and
// never reach the upstream (SPEC.md §4, §9):
//
//   - Authorization and Cookie carry the caller's credentials for the proxy
//     (its JWT); the endpoint's own credentials are injected instead.
//   - Prefer carries RFC 7240 preferences (respond-async, wait=N) that the
//     proxy honours itself; forwarding them would ask the upstream for
//     behaviour the proxy already decided.
//   - Expect: the proxy has already read the whole body, so there is nothing
//     left to negotiate with `Expect: 100-continue` (RFC 9110 §10.1.1).
//   - Host and Content-Length are set from the upstream URL and the body.
var callerOnly = []string{
	"Authorization",
	"Cookie",
	"Prefer",
	"Expect",
	"Host",
	"Content-Length",
}

// connectionTokens adds to drop the canonical names of every field listed in
// h's Connection header fields: several fields, comma-separated lists and
// empty members are all allowed (RFC 9110 §7.6.1, §5.6.1). Keys of h are
// matched case-insensitively.
func connectionTokens(h http.Header, drop map[string]bool) {
	for k, vs := range h {
		if textproto.CanonicalMIMEHeaderKey(k) != "Connection" {
			continue
		}
		for _, v := range vs {
			for tok := range strings.SplitSeq(v, ",") {
				if tok = textproto.TrimString(tok); tok != "" {
					drop[textproto.CanonicalMIMEHeaderKey(tok)] = true
				}
			}
		}
	}
}

// OutboundHeader returns the header sent upstream for a caller's header in
// (SPEC.md §4): in's fields with canonical names, minus the hop-by-hop fields
// (every field named in Connection included), minus Authorization, Cookie,
// Proxy-Authorization, Prefer, Expect, Host and Content-Length, plus the
// endpoint's injected fields, which replace any caller field of the same name
// (so a caller can neither override nor remove them, and `Connection:
// Authorization` cannot strip an injected Authorization). Names the caller
// used that are not valid tokens are kept as they are; values are never
// altered. Neither argument is modified; the result shares no slices with
// them. Either argument may be nil.
func OutboundHeader(in http.Header, injected http.Header) http.Header {
	drop := make(map[string]bool, len(hopByHop)+len(callerOnly)+len(injected)+4)
	for _, k := range hopByHop {
		drop[k] = true
	}
	for _, k := range callerOnly {
		drop[k] = true
	}
	connectionTokens(in, drop)
	for k := range injected {
		drop[textproto.CanonicalMIMEHeaderKey(k)] = true
	}
	out := make(http.Header, len(in)+len(injected))
	for _, k := range slices.Sorted(maps.Keys(in)) { // sorted: "x-a" and "X-A" merge in a fixed order
		vs := in[k]
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if drop[ck] {
			continue
		}
		out[ck] = append(out[ck], vs...)
	}
	for _, k := range slices.Sorted(maps.Keys(injected)) {
		vs := injected[k]
		ck := textproto.CanonicalMIMEHeaderKey(k)
		out[ck] = append(out[ck], vs...)
	}
	return out
}

// ProxyOwned reports whether a response field, by its canonical name, is
// one only the proxy sets (SPEC §10 "upstream responses never carry proxy
// signals"): every Callout-* field (Callout-Outcome, Callout-Id,
// Callout-Record, Callout-Problem, Callout-Replay-Body, and any the proxy
// adds later) and Idempotent-Replayed. An upstream that sends one, by
// accident or to mislead the caller, is not believed: the field is dropped.
func ProxyOwned(canonical string) bool {
	return strings.HasPrefix(canonical, "Callout-") || canonical == "Idempotent-Replayed"
}

// inboundHeader returns an upstream response's header as the caller gets it:
// hop-by-hop fields (and every field named in Connection) removed, the
// proxy's own fields (ProxyOwned) removed, names canonical, values
// unchanged (RFC 9110 §7.6.1).
func inboundHeader(in http.Header) http.Header {
	drop := make(map[string]bool, len(hopByHop)+2)
	for _, k := range hopByHop {
		drop[k] = true
	}
	connectionTokens(in, drop)
	out := make(http.Header, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		vs := in[k]
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if drop[ck] || ProxyOwned(ck) {
			continue
		}
		out[ck] = append(out[ck], vs...)
	}
	return out
}
