package forward

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// maxDecodeRounds bounds how many times a path segment is percent-decoded
// when looking for dot segments hidden under several encodings.
const maxDecodeRounds = 4

// UpstreamURL returns the upstream URL for a callout (contract §4): base's
// scheme, host and port, base's path without its trailing slash followed by
// escapedPath, and rawQuery appended as it came. escapedPath is the caller's
// path below /callout/{endpoint} exactly as escaped on the wire ("" or
// "/..."); it is kept byte for byte in the result's RawPath, so an escape
// the caller sent (%20, %C3%A9) reaches the upstream unchanged.
//
// Nothing in the caller's path may change the scheme, host, port or base
// path, so UpstreamURL refuses, with a *problem.Error of code
// problem.PathEscape (400) naming what was wrong:
//
//   - a path that does not start with "/" (absolute-form or authority-form
//     targets such as "http://evil/" or "@evil", RFC 9112 §3.2);
//   - a byte that is not a URI path character (RFC 3986 §3.3), a backslash,
//     a raw "@", a control character, a malformed percent-escape;
//   - an empty segment ("//host", "/a//b"); a single trailing slash is fine;
//   - a "." or ".." segment, in any encoding or case (%2e, %2E%2e), also with
//     Tomcat-style parameters ("..;x") and double-encoded (%252e%252e: some
//     servers and frameworks decode twice, so it is refused rather than
//     trusted to arrive as the literal text "%2e%2e");
//   - a segment that decodes to "/", "\", "@" or a control character (%2F,
//     %5C, %40, %00).
//
// A rawQuery with a control character, space, "#" or a non-ASCII byte is a
// *problem.Error of code problem.InvalidRequest. base must be absolute (the
// config loader guarantees it); a nil or relative base is problem.Internal.
func UpstreamURL(base *url.URL, escapedPath, rawQuery string) (*url.URL, error) {
	if base == nil || base.Scheme == "" || base.Host == "" {
		return nil, problem.Errorf(problem.Internal, "the endpoint has no absolute base URL")
	}
	if err := checkPath(escapedPath); err != nil {
		return nil, problem.Wrap(problem.PathEscape,
			"the callout path could leave the endpoint's base path: "+err.Error(), err)
	}
	if err := checkQuery(rawQuery); err != nil {
		return nil, problem.Wrap(problem.InvalidRequest, "the callout query is malformed: "+err.Error(), err)
	}
	rawBase := strings.TrimSuffix(base.EscapedPath(), "/")
	rawPath := rawBase + escapedPath
	path, err := url.PathUnescape(rawPath)
	if err != nil { // unreachable after checkPath unless the base is malformed
		return nil, problem.Wrap(problem.Internal, "the endpoint's base path is malformed", err)
	}
	// RawPath is always set, even without escapes: left empty, Go would
	// re-escape sub-delims such as "!" and "'" in Path.
	u := &url.URL{
		Scheme:   base.Scheme,
		Host:     base.Host,
		Path:     path,
		RawPath:  rawPath,
		RawQuery: rawQuery,
	}
	return u, nil
}

// checkPath applies UpstreamURL's path rules; its error names the offence.
func checkPath(p string) error {
	if p == "" {
		return nil
	}
	if p[0] != '/' {
		return errors.New("it does not start with \"/\" (absolute-form targets are not accepted)")
	}
	if err := checkPathBytes(p); err != nil {
		return err
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		if seg == "" {
			if i == len(segs)-1 {
				continue // one trailing slash
			}
			return errors.New("it has an empty segment (\"//\")")
		}
		if err := checkSegment(seg); err != nil {
			return err
		}
	}
	return nil
}

// checkPathBytes refuses bytes that are not pchar or "/" (RFC 3986 §3.3) and
// malformed percent-escapes.
func checkPathBytes(p string) error {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
		case c == '%':
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return errors.New("it has a malformed percent-escape at byte " + strconv.Itoa(i))
			}
		case c == '\\':
			return errors.New("it contains a backslash")
		case c == '@':
			return errors.New("it contains \"@\"")
		case c < 0x20 || c == 0x7f:
			return errors.New("it contains a control character")
		case !isPathChar(c):
			return errors.New("it contains the character " + strconv.QuoteRune(rune(c)) +
				" which must be percent-encoded")
		}
	}
	return nil
}

// checkSegment refuses a segment that decodes to a dot segment (once or
// after several decodings) or hides a separator, "@" or a control character.
func checkSegment(seg string) error {
	dec, err := url.PathUnescape(seg)
	if err != nil {
		return errors.New("it has a malformed percent-escape")
	}
	for i := 0; i < len(dec); i++ {
		switch c := dec[i]; {
		case c == '/':
			return errors.New("it contains an encoded \"/\" (%2F)")
		case c == '\\':
			return errors.New("it contains an encoded backslash (%5C)")
		case c == '@':
			return errors.New("it contains an encoded \"@\" (%40)")
		case c < 0x20 || c == 0x7f:
			return errors.New("it contains an encoded control character")
		}
	}
	for range maxDecodeRounds {
		name, _, _ := strings.Cut(dec, ";") // "..;x" is ".." to Tomcat
		if name == "." || name == ".." {
			return errors.New("it has a dot segment (\".\" or \"..\", in some encoding)")
		}
		next, err := url.PathUnescape(dec)
		if err != nil || next == dec {
			break
		}
		dec = next
	}
	return nil
}

// checkQuery refuses a raw query that could not be written on a request
// line as it is (RFC 3986 §3.4; RFC 9112 §3).
func checkQuery(q string) error {
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c <= 0x20 || c >= 0x7f:
			return errors.New("it contains a control, space or non-ASCII byte")
		case c == '#':
			return errors.New("it contains \"#\"")
		}
	}
	return nil
}

// isPathChar reports whether c may appear unencoded in a path segment:
// unreserved, sub-delims or ":" (RFC 3986 §3.3; "@" and "%" are handled by
// the caller).
func isPathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:", c) >= 0
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
