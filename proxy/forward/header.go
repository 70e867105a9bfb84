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
// never reach the upstream (contract §4, §9):
//
//   - Authorization and Cookie carry the caller's credentials for the proxy
//     (its JWT); the endpoint's own credentials are injected instead.
//   - Prefer carries RFC 7240 preferences (respond-async, wait=N) that the
//     proxy honours itself; forwarding them would ask the upstream for
//     behaviour the proxy already decided.
//   - Expect: the proxy has already read the whole body, so there is nothing
//     left to negotiate with `Expect: 100-continue` (RFC 9110 §10.1.1).
//   - Host and Content-Length are set from the upstream URL and the body.
//   - Forwarded (RFC 7239), X-Forwarded-For, -Host, -Proto, -Port and
//     X-Real-Ip describe the hops in front of the proxy. The proxy is the
//     upstream's client of record (the upstream allow-lists the proxy's
//     egress addresses, contract §10), so a caller's claim about where the
//     request came from is not passed on — an upstream that trusts these
//     fields could otherwise be told any address — and the proxy adds none
//     of its own: Salesforce's addresses are not the upstream's business.
var callerOnly = []string{
	"Authorization",
	"Cookie",
	"Prefer",
	"Expect",
	"Host",
	"Content-Length",
	"Forwarded",
	"X-Forwarded-For",
	"X-Forwarded-Host",
	"X-Forwarded-Proto",
	"X-Forwarded-Port",
	"X-Real-Ip",
}

// foldsOnto reports whether the caller's field name ck (canonical), read by
// an upstream that folds "_" into "-", would be a name controlled reports:
// CGI-style servers and frameworks (WSGI, Rack, PHP) map both X-Api-Key and
// X_Api_Key to HTTP_X_API_KEY, so a caller could otherwise slip a value
// under the name of a field the proxy injects or drops. Other names with
// underscores pass: Salesforce itself sends Sfdc_stack_depth on every
// callout, and a Salesforce upstream needs it to stop callout loops.
func foldsOnto(ck string, controlled func(string) bool) bool {
	if strings.IndexByte(ck, '_') < 0 {
		return false
	}
	return controlled(textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(ck, "_", "-")))
}

// connectionTokens calls add with the canonical name of every field listed
// in h's Connection header fields: several fields, comma-separated lists
// and empty members are all allowed (RFC 9110 §7.6.1, §5.6.1). Keys of h
// are matched case-insensitively.
func connectionTokens(h http.Header, add func(string)) {
	for k, vs := range h {
		if textproto.CanonicalMIMEHeaderKey(k) != "Connection" {
			continue
		}
		for _, v := range vs {
			for tok := range strings.SplitSeq(v, ",") {
				if tok = textproto.TrimString(tok); tok != "" {
					add(textproto.CanonicalMIMEHeaderKey(tok))
				}
			}
		}
	}
}

// names is a set of canonical field names that is allocated only when
// something is added: most requests name no field in Connection.
type names map[string]bool

func (n *names) add(name string) {
	if *n == nil {
		*n = names{}
	}
	(*n)[name] = true
}

// eachField calls fn with every field of h, in sorted order when some name
// is not canonical (so "x-a" and "X-A" merge in a fixed order); a header
// whose names are all canonical, as net/http's server makes them, needs
// no order (no two of its names merge) and no sorted copy.
func eachField(h http.Header, fn func(k string, vs []string)) {
	canonical := true
	for k := range h {
		if textproto.CanonicalMIMEHeaderKey(k) != k {
			canonical = false
			break
		}
	}
	if canonical {
		for k, vs := range h {
			fn(k, vs)
		}
		return
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fn(k, h[k])
	}
}

// OutboundHeader returns the header sent upstream for a caller's header in
// (contract §4): in's fields with canonical names, minus the hop-by-hop fields
// (every field named in Connection included), minus Authorization, Cookie,
// Proxy-Authorization, Prefer, Expect, Host, Content-Length, Forwarded and
// the X-Forwarded-* family (callerOnly), minus every field with an
// underscore whose name, "_" read as "-", is one of those, Idempotency-Key
// or an injected field (foldsOnto), plus the
// endpoint's injected fields, which replace any caller field of the same name
// (so a caller can neither override nor remove them, and `Connection:
// Authorization` cannot strip an injected Authorization). Names the caller
// used that are not valid tokens are kept as they are; values are never
// altered. Neither argument is modified; the result shares no slices with
// them. Either argument may be nil. On the hot path: no set is
// built unless the caller names fields in Connection or fields are
// injected.
func OutboundHeader(in http.Header, injected http.Header) http.Header {
	var extra names // Connection's fields and the injected names
	connectionTokens(in, extra.add)
	for k := range injected {
		extra.add(textproto.CanonicalMIMEHeaderKey(k))
	}
	dropped := func(ck string) bool {
		return slices.Contains(hopByHop, ck) || slices.Contains(callerOnly, ck) || extra[ck]
	}
	// The upstream deduplicates on the one key the proxy scoped; an
	// Idempotency_Key beside it must not reach a folding upstream.
	controlled := func(ck string) bool { return ck == "Idempotency-Key" || dropped(ck) }
	out := make(http.Header, len(in)+len(injected))
	copyFields(out, in, 0, func(ck string) bool { return dropped(ck) || foldsOnto(ck, controlled) })
	if len(injected) == 0 {
		return out // no sorted copy of no names (three allocations, twice a write)
	}
	for _, k := range slices.Sorted(maps.Keys(injected)) {
		vs := injected[k]
		ck := textproto.CanonicalMIMEHeaderKey(k)
		out[ck] = append(out[ck], vs...)
	}
	return out
}

// ProxyOwned reports whether a response field, by its canonical name, is
// one only the proxy sets (contract §10 "upstream responses never carry proxy
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
// unchanged (RFC 9110 §7.6.1). The kept values are copied into one array,
// each field's a full slice of it (copyFields), with room for spare more
// values after them (responseHeader's Content-Length).
func inboundHeader(in http.Header, spare int) (http.Header, []string) {
	var extra names
	connectionTokens(in, extra.add)
	out := make(http.Header, len(in)+spare)
	vals := copyFields(out, in, spare, func(ck string) bool {
		return slices.Contains(hopByHop, ck) || extra[ck] || ProxyOwned(ck)
	})
	return out, vals
}

// copyFields copies the fields of in into out, names canonical, values
// unchanged, but for those drop reports by canonical name. The kept values
// are copied into one array, with room for spare more values after them,
// each field's a full slice of it (its capacity its length, so an append to
// one field copies and never runs into the next): one allocation, not one
// per field. It returns that array.
func copyFields(out, in http.Header, spare int, drop func(ck string) bool) []string {
	n := spare
	for _, vs := range in {
		n += len(vs)
	}
	vals := make([]string, 0, n)
	eachField(in, func(k string, vs []string) {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if drop(ck) {
			return
		}
		if cur, ok := out[ck]; ok { // names that merge ("x-a", "X-A")
			out[ck] = append(cur, vs...)
			return
		}
		start := len(vals)
		vals = append(vals, vs...)
		out[ck] = vals[start:len(vals):len(vals)]
	})
	return vals
}
