package policy

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	// Sunday 29 November 2026, 21:30:00 UTC.
	now := time.Date(2026, 11, 29, 21, 30, 0, 0, time.UTC)
	nowHalf := now.Add(500 * time.Millisecond)
	nowBerlin := now.In(time.FixedZone("CET", 3600))
	// Sunday 6 December 2026: a single-digit day for asctime.
	dec6 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	// In 2150, "00" in an RFC 850 date means 2100, which has no 29 February.
	in2150 := time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC)

	tests := []struct {
		name   string
		value  string
		now    time.Time
		want   time.Duration
		wantOK bool
	}{
		// delta-seconds (RFC 9110 §10.2.3: 1*DIGIT).
		{"seconds", "120", now, 120 * time.Second, true},
		{"zero", "0", now, 0, true},
		{"leading zeros", "007", now, 7 * time.Second, true},
		{"surrounding spaces", "  120  ", now, 120 * time.Second, true},
		{"surrounding tabs", "\t7\t", now, 7 * time.Second, true},
		{"largest that fits", "9223372036", now, 9223372036 * time.Second, true},
		{"one more overflows Duration", "9223372037", now, 0, false},
		{"max uint64", "18446744073709551615", now, 0, false},
		{"overflows uint64", "99999999999999999999999", now, 0, false},
		{"negative", "-5", now, 0, false},
		{"plus sign", "+5", now, 0, false},
		{"decimal", "1.5", now, 0, false},
		{"exponent", "1e3", now, 0, false},
		{"inner space", "1 0", now, 0, false},
		{"underscore", "1_000", now, 0, false},
		{"hex", "0x10", now, 0, false},
		{"unit suffix", "10s", now, 0, false},
		{"empty", "", now, 0, false},
		{"only spaces", "   ", now, 0, false},
		{"garbage", "soon", now, 0, false},
		{"fullwidth digits", "１２", now, 0, false},

		// IMF-fixdate (RFC 9110 §5.6.7).
		{"imf 90s ahead", "Sun, 29 Nov 2026 21:31:30 GMT", now, 90 * time.Second, true},
		{"imf 90s ahead of sub-second now", "Sun, 29 Nov 2026 21:31:30 GMT", nowHalf, 89500 * time.Millisecond, true},
		{"imf 90s ahead, now in another zone", "Sun, 29 Nov 2026 21:31:30 GMT", nowBerlin, 90 * time.Second, true},
		{"imf padded", " Sun, 29 Nov 2026 21:31:30 GMT ", now, 90 * time.Second, true},
		{"imf 10 minutes past", "Sun, 29 Nov 2026 21:20:00 GMT", now, 0, false},
		{"imf equal to now", "Sun, 29 Nov 2026 21:30:00 GMT", now, 0, false},
		{"imf 1s ahead", "Sun, 29 Nov 2026 21:30:01 GMT", now, time.Second, true},
		{"imf RFC example, long past", "Sun, 06 Nov 1994 08:49:37 GMT", now, 0, false},
		{"imf zone PST", "Sun, 29 Nov 2026 21:31:30 PST", now, 0, false},
		{"imf zone UTC", "Sun, 29 Nov 2026 21:31:30 UTC", now, 0, false},
		{"imf numeric zone", "Sun, 29 Nov 2026 21:31:30 +0000", now, 0, false},
		{"imf day 32", "Sun, 32 Nov 2026 21:31:30 GMT", now, 0, false},
		{"imf hour 25", "Sun, 29 Nov 2026 25:31:30 GMT", now, 0, false},
		{"imf bad day name", "Xyz, 29 Nov 2026 21:31:30 GMT", now, 0, false},
		{"imf year 9999 overflows", "Fri, 31 Dec 9999 23:59:59 GMT", now, 0, false},
		{"imf no seconds", "Sun, 29 Nov 2026 21:31 GMT", now, 0, false},

		// Obsolete RFC 850 form.
		{"rfc850 90s ahead", "Sunday, 29-Nov-26 21:31:30 GMT", now, 90 * time.Second, true},
		{"rfc850 10 minutes past", "Sunday, 29-Nov-26 21:20:00 GMT", now, 0, false},
		{"rfc850 RFC example, long past", "Sunday, 06-Nov-94 08:49:37 GMT", now, 0, false},
		{"rfc850 year 75 is 2075, not 1975", "Tuesday, 01-Jan-75 00:00:00 GMT", now,
			time.Date(2075, 1, 1, 0, 0, 0, 0, time.UTC).Sub(now), true},
		{"rfc850 year 77 is 1977, past", "Saturday, 01-Jan-77 00:00:00 GMT", now, 0, false},
		{"rfc850 29 Feb 00 in 2150 is 2100, invalid", "Monday, 29-Feb-00 00:00:00 GMT", in2150, 0, false},
		{"rfc850 28 Feb 00 in 2150 is 2100, past", "Sunday, 28-Feb-00 00:00:00 GMT", in2150, 0, false},
		{"rfc850 zone PST", "Sunday, 29-Nov-26 21:31:30 PST", now, 0, false},
		{"rfc850 four-digit year", "Sunday, 29-Nov-2026 21:31:30 GMT", now, 0, false},

		// asctime form.
		{"asctime 90s ahead", "Sun Nov 29 21:31:30 2026", now, 90 * time.Second, true},
		{"asctime single-digit day", "Sun Dec  6 09:01:30 2026", dec6, 90 * time.Second, true},
		{"asctime 10 minutes past", "Sun Nov 29 21:20:00 2026", now, 0, false},
		{"asctime RFC example, long past", "Sun Nov  6 08:49:37 1994", now, 0, false},
		{"asctime with zone", "Sun Nov 29 21:31:30 GMT 2026", now, 0, false},

		// Other date formats are not HTTP-dates.
		{"RFC 3339", "2026-11-29T21:31:30Z", now, 0, false},
		{"RFC 1123 numeric zone", "Sun, 29 Nov 2026 21:31:30 -0700", now, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.value, tt.now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// What net/http formats, for each of its layouts, ParseRetryAfter reads back.
func TestParseRetryAfterFormattedDates(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	layouts := map[string]string{
		"http.TimeFormat": http.TimeFormat,
		"RFC 850 GMT":     "Monday, 02-Jan-06 15:04:05 GMT",
		"time.ANSIC":      time.ANSIC,
	}
	for name, layout := range layouts {
		for _, ahead := range []time.Duration{time.Second, 90 * time.Second, time.Hour, 30 * 24 * time.Hour} {
			t.Run(name+" "+ahead.String(), func(t *testing.T) {
				v := now.Add(ahead).Format(layout)
				got, ok := ParseRetryAfter(v, now)
				if !ok || got != ahead {
					t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, true", v, got, ok, ahead)
				}
				if got, ok := ParseRetryAfter(now.Add(-ahead).Format(layout), now); ok {
					t.Errorf("past date %v ago: got %v, true; want absent", ahead, got)
				}
			})
		}
	}
}
