package auth

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// bearerToken extracts the token of an RFC 6750 §2.1 credential,
// `Bearer <token>`. The scheme is case-insensitive (RFC 9110 §11.1). The
// errors are Unauthorized problems whose details never echo the header, so a
// token sent under the wrong scheme does not end up in a response or a log.
func bearerToken(authorization string) (string, error) {
	v := strings.TrimSpace(authorization)
	if v == "" {
		return "", problem.Errorf(problem.Unauthorized, "missing bearer token: no Authorization header")
	}
	scheme, token, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", problem.Errorf(problem.Unauthorized, "Authorization scheme is not Bearer (RFC 6750 §2.1)")
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return "", problem.Errorf(problem.Unauthorized, "empty bearer token")
	}
	return token, nil
}

// maxQuoted bounds, in bytes, a caller-supplied value quoted in a detail.
const maxQuoted = 100

// quote renders a caller-supplied claim or header value for a problem
// detail: Go-quoted and cut to maxQuoted bytes (on a rune boundary), so a
// huge claim cannot bloat responses and logs.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
