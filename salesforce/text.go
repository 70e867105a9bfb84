package salesforce

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// Text limits are in characters as Salesforce counts them: UTF-16 code
// units (Apex String.length(); a character outside the Basic Multilingual
// Plane counts two). Cutting by that count keeps every value within its
// field whatever it holds.

// utf16Len is the number of UTF-16 code units of r.
func utf16Len(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// CutText returns s cut to at most max characters (UTF-16 code units) on a
// character boundary, and whether it was cut. s must be valid UTF-8; a
// max of 0 or less cuts everything.
func CutText(s string, max int) (string, bool) {
	if len(s) <= max { // every character takes at least one byte
		return s, false
	}
	n := 0
	for i, r := range s {
		n += utf16Len(r)
		if n > max {
			return s[:i], true
		}
	}
	return s, false
}

// cleanText makes s valid UTF-8 (invalid bytes become U+FFFD) and cuts it
// to max characters.
func cleanText(s string, max int) string {
	t, _ := CutText(strings.ToValidUTF8(s, "\uFFFD"), max)
	return t
}

// Body is a body prepared for a Long Text Area field (contract §7; the proxy's
// own store keeps the whole payload for replay).
type Body struct {
	// Text is the value to write: the body itself when it is UTF-8, else
	// its standard base64 (RFC 4648 §4); cut to the field's size.
	Text string
	// Truncated: Text holds only the start (cut here, or the stored body
	// was already capped).
	Truncated bool
	// Base64: the body is not UTF-8, so Text is base64 of its bytes.
	Base64 bool
}

// TextBody prepares b for a field of max characters: UTF-8 is cut on a
// character boundary; anything else is stored as base64, cut to a multiple
// of 4 characters so that what is kept still decodes.
func TextBody(b []byte, max int) Body {
	if max <= 0 {
		return Body{Truncated: len(b) > 0}
	}
	if utf8.Valid(b) {
		t, cut := CutText(string(b), max)
		return Body{Text: t, Truncated: cut}
	}
	enc := base64.StdEncoding.EncodeToString(b)
	if len(enc) <= max {
		return Body{Text: enc, Base64: true}
	}
	return Body{Text: enc[:max-max%4], Truncated: true, Base64: true}
}
