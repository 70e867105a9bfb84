package policy

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// HTTP-date layouts of RFC 9110 §5.6.7, all in GMT.
const (
	// imfFixdate is the preferred form: "Sun, 06 Nov 1994 08:49:37 GMT".
	imfFixdate = "Mon, 02 Jan 2006 15:04:05 GMT"
	// rfc850Date is the obsolete RFC 850 form: "Sunday, 06-Nov-94 08:49:37 GMT".
	rfc850Date = "Monday, 02-Jan-06 15:04:05 GMT"
	// asctimeDate is C's asctime() form: "Sun Nov  6 08:49:37 1994".
	asctimeDate = "Mon Jan _2 15:04:05 2006"
)

// ParseRetryAfter parses a Retry-After header value (RFC 9110 §10.2.3) into
// the wait it asks for, measured from now, and reports whether the value
// counts. The value is either delta-seconds (1*DIGIT) or an HTTP-date in any
// of the three forms of RFC 9110 §5.6.7: IMF-fixdate, the obsolete RFC 850
// form and asctime. Leading and trailing whitespace is ignored.
//
// As contract §3 says, an invalid, negative, past or overflowing value counts
// as absent, so the result is (0, false) for: an empty value; a number with
// a sign, a decimal point, an exponent or inner spaces ("-5", "+5", "1.5",
// "1 0"); a number of seconds too large for a time.Duration (over about 292
// years); anything that is not one of the three date forms (a zone other
// than GMT included); a date at or before now; a date too far ahead for a
// time.Duration. "0" is valid: (0, true), no wait.
//
// A two-digit RFC 850 year is read as RFC 9110 §5.6.7 requires: a year more
// than 50 years after now's is taken as the most recent past year with those
// digits. The day name is checked for spelling only, as time.Parse does.
// Capping the wait (retry_after_cap) is the caller's business (NextDelay).
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		return parseDeltaSeconds(v)
	}
	t, ok := parseHTTPDate(v, now)
	if !ok {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 || d == time.Duration(math.MaxInt64) { // past, or saturated by Sub
		return 0, false
	}
	return d, true
}

// isDigits reports whether s is non-empty and all ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseDeltaSeconds turns 1*DIGIT into a Duration; a value that overflows
// uint64 or a Duration counts as absent.
func parseDeltaSeconds(s string) (time.Duration, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > uint64(math.MaxInt64/int64(time.Second)) {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// parseHTTPDate parses the three HTTP-date forms of RFC 9110 §5.6.7 as UTC.
func parseHTTPDate(s string, now time.Time) (time.Time, bool) {
	if t, err := time.Parse(imfFixdate, s); err == nil {
		return t, true
	}
	if t, err := time.Parse(asctimeDate, s); err == nil {
		return t, true
	}
	if t, err := time.Parse(rfc850Date, s); err == nil {
		return rfc850Century(t, now)
	}
	return time.Time{}, false
}

// rfc850Century re-reads the two-digit year of an RFC 850 date per RFC 9110
// §5.6.7: the year with those last two digits in now's century, or a century
// earlier when that is more than 50 years after now. A 29 February that does
// not exist in the chosen year makes the date invalid.
func rfc850Century(t, now time.Time) (time.Time, bool) {
	thisYear := now.UTC().Year()
	year := thisYear - thisYear%100 + t.Year()%100
	if year > thisYear+50 {
		year -= 100
	}
	r := time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
	if r.Day() != t.Day() {
		return time.Time{}, false
	}
	return r, true
}
