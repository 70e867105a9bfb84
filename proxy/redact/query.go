package redact

import (
	"mime"
	"net/url"
	"strings"
)

// formType is the media type of HTML form bodies (WHATWG URL Standard §5,
// application/x-www-form-urlencoded).
const formType = "application/x-www-form-urlencoded"

// Query returns rawQuery (a URL's query without the '?') with the value of
// every redacted parameter replaced by Mask: "a=1&api_key=s3cr%20t&b"
// becomes "a=1&api_key=[REDACTED]&b". Parameters are split at '&' only (as
// net/url does since Go 1.17); a name is compared case-sensitively after
// percent-decoding it ('+' read as a space), and compared as written when it
// does not decode. Every other byte, the order, repeated parameters, empty
// segments and names without '=' (which carry no value) are kept exactly;
// nothing is re-encoded. Every occurrence of a repeated name is masked, an
// empty value too.
func (r *Rules) Query(rawQuery string) string {
	if r == nil || len(r.query) == 0 || rawQuery == "" {
		return rawQuery
	}
	segments := strings.Split(rawQuery, "&")
	changed := false
	for i, seg := range segments {
		name, _, hasValue := strings.Cut(seg, "=")
		if hasValue && r.hidesParam(name) {
			segments[i] = name + "=" + Mask
			changed = true
		}
	}
	if !changed {
		return rawQuery
	}
	return strings.Join(segments, "&")
}

// hidesParam reports whether a raw (still percent-encoded) parameter name is
// a redacted one.
func (r *Rules) hidesParam(raw string) bool {
	name, err := url.QueryUnescape(raw)
	if err != nil {
		name = raw
	}
	_, ok := r.query[name]
	return ok
}

// PathAndQuery redacts a request target in origin form (RFC 9112 §3.2.1),
// "/v1/charges?api_key=s3cret": the part after the first '?' goes through
// Query, the path is kept as is. A target without '?' is returned unchanged.
func (r *Rules) PathAndQuery(pathWithQuery string) string {
	path, query, ok := strings.Cut(pathWithQuery, "?")
	if !ok {
		return pathWithQuery
	}
	return path + "?" + r.Query(query)
}

// isForm reports whether a Content-Type header value names a form body.
// Media types compare case-insensitively (RFC 9110 §8.3.1); an unparsable
// value is judged by what precedes its first ';'.
func isForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		before, _, _ := strings.Cut(contentType, ";")
		mt = strings.ToLower(strings.TrimSpace(before))
	}
	return mt == formType
}
