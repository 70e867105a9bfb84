package redact

import (
	"bytes"
	"encoding/json"
)

// maskJSON is Mask as a JSON string (RFC 8259 §7).
const maskJSON = `"` + Mask + `"`

// JSONBody redacts a request or response body for display and returns it
// with true when it recognised the body, or body itself with false when it
// did not. The result shares no storage with body when anything was masked,
// and is body itself otherwise; callers must not modify either.
//
// JSON is recognised by sniffing, whatever contentType says (Apex labels
// JSON as application/x-www-form-urlencoded when no Content-Type is set): a
// body whose first non-whitespace byte is '{' or '[' and that is valid JSON
// (RFC 8259; json.Valid). The value at every configured dot path is replaced
// by the JSON string "[REDACTED]", whatever its type (an object or array is
// masked whole). Arrays are transparent: `items.card.number` masks the card
// number of every element of `items`, and `card.number` reaches into a
// top-level array. Every object key that matches is masked, duplicates
// included. Only the masked values' bytes change: key order, whitespace,
// escapes and numbers such as 1.10 or 1e400 stay verbatim.
//
// A body that is not JSON is a form when contentType's media type is
// application/x-www-form-urlencoded (any case, whatever its parameters,
// such as charset); its redacted query parameters are masked as Query does
// (a name that does not percent-decode is compared as written), and
// JSONBody returns true.
// Any other body (text, XML, binary, invalid JSON, a top-level JSON scalar)
// comes back unchanged with false.
func (r *Rules) JSONBody(contentType string, body []byte) ([]byte, bool) {
	if sniffJSON(body) && json.Valid(body) {
		if r == nil || len(r.paths) == 0 {
			return body, true
		}
		return r.redactJSON(body), true
	}
	if isForm(contentType) {
		if r == nil || len(r.query) == 0 {
			return body, true
		}
		masked := r.Query(string(body))
		if masked == string(body) {
			return body, true
		}
		return []byte(masked), true
	}
	return body, false
}

// sniffJSON reports whether the first byte after JSON whitespace (RFC 8259
// §2) opens an object or an array.
func sniffJSON(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
}

// span is a byte range [start, end) of a body to replace by maskJSON.
type span struct{ start, end int }

// redactJSON masks the configured paths of a body json.Valid accepted.
func (r *Rules) redactJSON(body []byte) []byte {
	w := walker{body: body, paths: r.paths}
	live := make([]int, len(r.paths))
	for i := range live {
		live[i] = i
	}
	w.value(0, 0, live)
	if len(w.spans) == 0 {
		return body
	}
	out := make([]byte, 0, len(body))
	prev := 0
	for _, s := range w.spans {
		out = append(out, body[prev:s.start]...)
		out = append(out, maskJSON...)
		prev = s.end
	}
	return append(out, body[prev:]...)
}
