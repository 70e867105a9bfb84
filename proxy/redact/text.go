package redact

import "strings"

// Text redacts free text, such as an error message, that may quote a
// credential or a URL. Values in free text cannot be found by header name,
// so Text does exactly two things, and nothing else:
//
//  1. After the word "Bearer" or "Basic" (any case, not preceded by a
//     letter, digit or '_', followed by at least one space or tab), the run
//     of non-whitespace bytes that follows is replaced by Mask:
//     "got 401 for Bearer eyJhbGci.x.y" becomes "got 401 for Bearer
//     [REDACTED]". The word itself stays. Ordinary prose is masked too
//     ("Basic auth failed" gives "Basic [REDACTED] failed"): safety first.
//  2. For every redacted query parameter name, each "?name=" or "&name="
//     (the name as configured, not percent-encoded) has its value, up to the
//     next '&', '#', quote, '<', '>' or whitespace, replaced by Mask, as
//     quoted URLs in net/http errors carry them:
//     `Get "https://h/p?api_key=s3cret": EOF` becomes
//     `Get "https://h/p?api_key=[REDACTED]": EOF`.
//
// Text is idempotent. A nil *Rules does step 1 only.
func (r *Rules) Text(s string) string {
	s = replaceSpans(s, nextCredential)
	if r == nil {
		return s
	}
	for _, name := range r.queryNames {
		s = replaceSpans(s, func(s string, from int) (int, int) {
			return nextParam(s, from, name)
		})
	}
	return s
}

// replaceSpans replaces, left to right, every span [start, end) that next
// finds at or after from with Mask. next returns start -1 when there is none
// left; every span it returns lies at or after from.
func replaceSpans(s string, next func(s string, from int) (start, end int)) string {
	var b strings.Builder
	prev, changed := 0, false
	for {
		start, end := next(s, prev)
		if start < 0 {
			break
		}
		b.WriteString(s[prev:start])
		b.WriteString(Mask)
		prev, changed = end, true
	}
	if !changed {
		return s
	}
	b.WriteString(s[prev:])
	return b.String()
}

// nextCredential finds the next credential after a Bearer (RFC 6750 §2.1)
// or Basic (RFC 7617 §2) word at or after from: see Text, step 1. Schemes
// compare case-insensitively (RFC 9110 §11.1).
func nextCredential(s string, from int) (int, int) {
	for i := from; i < len(s); i++ {
		if i > 0 && isWordByte(s[i-1]) {
			continue
		}
		for _, scheme := range [...]string{"bearer", "basic"} {
			j := i + len(scheme)
			if j > len(s) || !strings.EqualFold(s[i:j], scheme) {
				continue
			}
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			if k == j || k == len(s) || isSpace(s[k]) {
				continue
			}
			end := k
			for end < len(s) && !isSpace(s[end]) {
				end++
			}
			return k, end
		}
	}
	return -1, -1
}

// nextParam finds the value of the next "?name=" or "&name=" at or after
// from: see Text, step 2.
func nextParam(s string, from int, name string) (int, int) {
	needle := name + "="
	for i := from; i < len(s); i++ {
		if (s[i] != '?' && s[i] != '&') || !strings.HasPrefix(s[i+1:], needle) {
			continue
		}
		start := i + 1 + len(needle)
		end := start
		for end < len(s) && !strings.ContainsRune("&#\"'<> \t\r\n", rune(s[end])) {
			end++
		}
		return start, end
	}
	return -1, -1
}

// isWordByte reports whether b is an ASCII letter, digit or '_'.
func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// isSpace reports whether b is ASCII whitespace.
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\r' || b == '\n' || b == '\v' || b == '\f'
}
