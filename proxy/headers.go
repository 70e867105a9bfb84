package proxy

import (
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// maxKeyLength is the longest Idempotency-Key accepted, in characters.
const maxKeyLength = 255

// parseIdempotencyKey reads the Idempotency-Key header (contract §5). The
// draft (draft-ietf-httpapi-idempotency-key-header §2.1) makes it an RFC
// 8941 sf-string, but real clients send bare values — Apex
// `UUID.randomUUID().toString()`, Stripe's, Square's and Adyen's libraries —
// so both forms are accepted:
//   - a quoted sf-string (`"abc-123"`, RFC 8941 §3.3.3, with `\"` and `\\`
//     escapes); the quotes are not part of the key;
//   - an unquoted value of printable ASCII (0x21–0x7E) without spaces or
//     commas: a comma would make it a list of two values.
//
// Either way the key is 1 to 255 characters, so `"abc"` and `abc` are the
// same key. It returns "" when the header is absent. Two fields, a list
// (`a, b` or `"a", "b"`), an empty value, spaces or control characters in
// an unquoted value, and non-ASCII are errors: *problem.Error
// IdempotencyKeyInvalid whose detail names what was wrong.
func parseIdempotencyKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", keyErr(strconv.Itoa(len(values)) + " Idempotency-Key fields; send exactly one")
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
		if err := checkBareKey(v); err != nil {
			return "", err
		}
		key = v
	}
	switch {
	case key == "":
		return "", keyErr("the key is empty")
	case len(key) > maxKeyLength:
		return "", keyErr("the key is " + strconv.Itoa(len(key)) + " characters long; at most 255 are allowed")
	}
	return key, nil
}

// checkBareKey checks an unquoted key: printable ASCII, no space, no comma.
func checkBareKey(v string) error {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ',':
			return keyErr("a comma-separated list of keys; send exactly one key")
		case c == ' ' || c == '\t':
			return keyErr(`an unquoted key may not contain spaces (quote it as an sf-string: "…")`)
		case c < 0x21 || c > 0x7e:
			return keyErr("only printable ASCII characters are allowed")
		}
	}
	return nil
}

func keyErr(detail string) error {
	return problem.Errorf(problem.IdempotencyKeyInvalid, "Idempotency-Key: "+detail)
}

// parseSfString decodes an RFC 8941 §3.3.3 sf-string. Anything after the
// closing quote is an error; a comma there is a list.
func parseSfString(v string) (string, error) {
	// A key without escapes (nearly all) is a substring of v; the builder
	// is used from the first backslash on: no allocation for the rest.
	var b strings.Builder
	escaped := false
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			if !escaped {
				escaped = true
				b.Grow(len(v))
				b.WriteString(v[1:i])
			}
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", keyErr(`a backslash may only escape " or \`)
			}
			b.WriteByte(v[i])
		case c == '"':
			rest := strings.TrimLeft(v[i+1:], " \t")
			switch {
			case rest == "" && escaped:
				return b.String(), nil
			case rest == "":
				return v[1:i], nil
			case rest[0] == ',':
				return "", keyErr("a comma-separated list of keys; send exactly one key")
			}
			return "", keyErr("characters after the closing quote")
		case c < 0x20 || c > 0x7e:
			return "", keyErr("only printable ASCII characters are allowed")
		case escaped:
			b.WriteByte(c)
		}
	}
	return "", keyErr("the sf-string has no closing quote")
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
