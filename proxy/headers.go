package proxy

import (
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// maxKeyLength is the longest Idempotency-Key accepted, in characters.
const maxKeyLength = 255

// parseIdempotencyKey reads the Idempotency-Key header: an RFC 8941
// sf-string (`"abc-123"`, with `\"` and `\\` escapes) or a bare sf-token,
// of 1 to 255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header
// §2.1). It returns "" when the header is absent; several fields are an
// error. Errors: *problem.Error IdempotencyKeyInvalid naming what was wrong.
func parseIdempotencyKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", keyErr("send exactly one Idempotency-Key header")
	}
	v := strings.Trim(values[0], " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		k, err := parseSfString(v)
		if err != nil {
			return "", err
		}
		key = k
	} else {
		if !isSfToken(v) {
			return "", keyErr(`send the key quoted, as an RFC 8941 sf-string ("3f2b8c1e-…"); unquoted, it must be an sf-token, which starts with a letter or * (a UUID starting with a digit must be quoted)`)
		}
		key = v
	}
	switch {
	case key == "":
		return "", keyErr("the key is empty")
	case len(key) > maxKeyLength:
		return "", keyErr("the key is longer than 255 characters")
	}
	return key, nil
}

func keyErr(detail string) error {
	return problem.Errorf(problem.IdempotencyKeyInvalid, "Idempotency-Key: "+detail)
}

// parseSfString decodes an RFC 8941 §3.3.3 sf-string.
func parseSfString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", keyErr(`a backslash may only escape " or \`)
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", keyErr("characters after the closing quote")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", keyErr("only printable ASCII characters are allowed")
		default:
			b.WriteByte(c)
		}
	}
	return "", keyErr("the sf-string has no closing quote")
}

// isSfToken reports an RFC 8941 §3.3.4 sf-token: ALPHA or "*" first, then
// tchar, ":" or "/".
func isSfToken(v string) bool {
	if v == "" {
		return false
	}
	c := v[0]
	if !(c == '*' || (c|0x20 >= 'a' && c|0x20 <= 'z')) {
		return false
	}
	for i := 1; i < len(v); i++ {
		if !isTchar(v[i]) && v[i] != ':' && v[i] != '/' {
			return false
		}
	}
	return true
}

// isTchar is RFC 9110 §5.6.2 tchar.
func isTchar(c byte) bool {
	if c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// preferences are the RFC 7240 preferences the proxy honours.
type preferences struct {
	// respondAsync: answer 202 at once; the dispatcher makes the first attempt.
	respondAsync bool
	// wait: how long the caller is willing to wait for inline retries.
	wait time.Duration
}

// parsePrefer reads every Prefer header (RFC 7240 §2): a comma-separated
// list of `token [= value] *(; param)`, names case-insensitive. Unknown
// preferences are ignored, as the RFC asks. wait takes delta-seconds.
func parsePrefer(values []string) preferences {
	var p preferences
	for _, v := range values {
		for _, pref := range strings.Split(v, ",") {
			pref, _, _ = strings.Cut(pref, ";")
			name, val, _ := strings.Cut(strings.TrimSpace(pref), "=")
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "respond-async":
				p.respondAsync = true
			case "wait":
				if n, err := strconv.ParseUint(val, 10, 31); err == nil {
					p.wait = time.Duration(n) * time.Second
				}
			}
		}
	}
	return p
}

// sourceRecord reads Callout-Source-Record: a 15- or 18-character
// Salesforce record id, or absent. Errors: *problem.Error InvalidRequest.
func sourceRecord(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	ok := len(v) == 15 || len(v) == 18
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z'
	}
	if !ok {
		return "", problem.Errorf(problem.InvalidRequest,
			"Callout-Source-Record must be a 15- or 18-character Salesforce record id")
	}
	return v, nil
}
