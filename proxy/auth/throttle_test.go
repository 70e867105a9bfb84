package auth_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// throttleRig is a LoginThrottle on an injected clock whose audit lines
// go to buf.
type throttleRig struct {
	clock *clocktest.Clock
	buf   *proctest.LogBuffer
	t     *auth.LoginThrottle
}

func newThrottleRig(failures int, window time.Duration, capacity int) *throttleRig {
	clock := clocktest.New(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	buf := &proctest.LogBuffer{}
	return &throttleRig{clock: clock, buf: buf,
		t: auth.NewLoginThrottle(failures, window, capacity, clock.Now, slog.New(slog.NewJSONHandler(buf, nil)))}
}

// wrong is a wrong token with its own prefix.
func wrong(i int) string { return "Bearer " + strconv.Itoa(100000000+i) + "-wrong-token-value" }

// TestThrottleAfterFailures: with 3 failures a minute, a source's first 3
// are 401s (the first logged), the 4th, 20 s in, is throttled for the 40 s
// left; once the window is over the source starts afresh, and its
// window's failures are one audit line.
func TestThrottleAfterFailures(t *testing.T) {
	r := newThrottleRig(3, time.Minute, 100)
	ctx := context.Background()
	for i := range 3 {
		v := r.t.Failure(ctx, "192.0.2.7:50000", wrong(i), true)
		if v.RetryAfter != 0 || v.Log != (i == 0) {
			t.Fatalf("failure %d: %+v, want not throttled, logged only the first", i+1, v)
		}
	}
	r.clock.Advance(20 * time.Second)
	v := r.t.Failure(ctx, "192.0.2.7:50001", wrong(3), true)
	if v.RetryAfter != 40*time.Second || v.RetryAfterSeconds() != 40 || v.Log {
		t.Fatalf("4th failure 20 s in: %+v, want throttled for 40 s, not logged", v)
	}
	if n := len(r.buf.Lines(t)); n != 0 {
		t.Fatalf("%d lines written inside the window, want 0", n)
	}
	r.clock.Advance(40 * time.Second)
	if v := r.t.Failure(ctx, "192.0.2.7:50002", wrong(4), true); v.RetryAfter != 0 || !v.Log {
		t.Fatalf("first failure of the next window: %+v, want a logged 401", v)
	}
	lines := r.buf.Lines(t)
	if len(lines) != 1 {
		t.Fatalf("lines %v, want the first window's one summary", lines)
	}
	l := lines[0]
	if l["msg"] != "audit" || l["result"] != "unauthorized_repeated" || l["remote_addr"] != "192.0.2.7" ||
		l["failures"] != 4.0 || l["throttled"] != 1.0 {
		t.Errorf("summary %v, want 4 failures, 1 throttled, from 192.0.2.7", l)
	}
	if strings.Contains(r.buf.String(), "wrong-token") {
		t.Error("a presented token reached the log")
	}
}

// TestThrottlePerPrefix: one token prefix tried from rotating addresses is
// throttled after 3 failures, though each address failed once.
func TestThrottlePerPrefix(t *testing.T) {
	r := newThrottleRig(3, time.Minute, 100)
	for i := range 3 {
		if v := r.t.Failure(context.Background(), "198.51.100."+strconv.Itoa(i)+":1", "Bearer samepref-"+strconv.Itoa(i), true); v.RetryAfter != 0 {
			t.Fatalf("failure %d: throttled already", i+1)
		}
	}
	v := r.t.Failure(context.Background(), "198.51.100.9:1", "Bearer samepref-x", true)
	if v.RetryAfter != time.Minute || !v.Log {
		t.Fatalf("4th try of the prefix from a new address: %+v, want throttled 60 s and its address's first line", v)
	}
	if v := r.t.Failure(context.Background(), "198.51.100.10:1", "", true); v.RetryAfter != 0 {
		t.Errorf("no token from a new address: %+v, want a 401 (no prefix to count)", v)
	}
}

// TestThrottleCollapsesAFlood: 500 wrong tokens from one source in one
// window: the caller logs the first; the throttle one line at the window's
// end (at the next Sweep) with all 500, 490 of them throttled.
func TestThrottleCollapsesAFlood(t *testing.T) {
	r := newThrottleRig(10, time.Minute, 10000)
	logged, throttled := 0, 0
	for i := range 500 {
		v := r.t.Failure(context.Background(), "203.0.113.5:4000", wrong(i), true)
		if v.Log {
			logged++
		}
		if v.RetryAfter > 0 {
			throttled++
		}
	}
	if logged != 1 || throttled != 490 {
		t.Fatalf("%d first lines, %d throttled, want 1 and 490", logged, throttled)
	}
	r.clock.Advance(time.Minute - time.Nanosecond)
	r.t.Sweep(context.Background())
	if n := len(r.buf.Lines(t)); n != 0 {
		t.Fatalf("%d lines before the window ended", n)
	}
	r.clock.Advance(time.Nanosecond)
	r.t.Sweep(context.Background())
	lines := r.buf.Lines(t)
	if len(lines) != 1 || lines[0]["failures"] != 500.0 || lines[0]["throttled"] != 490.0 {
		t.Fatalf("lines %v, want one with 500 failures, 490 throttled", lines)
	}
	if n := r.t.Len(); n != 0 {
		t.Errorf("%d entries remembered after the window, want 0", n)
	}
}

// TestThrottleMemoryIsBounded: 20,000 failures, each from a new address
// with a new prefix, never make the throttle remember more than its
// capacity of each kind; first lines stop at 100 a window, and the rest
// are one line; a flood of new prefixes from one address never pushes that
// address out (it is throttled after its 10 failures).
func TestThrottleMemoryIsBounded(t *testing.T) {
	r := newThrottleRig(10, time.Minute, 500)
	logged := 0
	for i := range 20000 {
		addr := "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + ":1"
		if r.t.Failure(context.Background(), addr, wrong(i), true).Log {
			logged++
		}
		if n := r.t.Len(); n > 1000 {
			t.Fatalf("after %d failures the throttle remembers %d, capacity 500 + 500", i+1, n)
		}
	}
	if logged != auth.MaxFirstLines {
		t.Errorf("%d first lines in one window, want %d", logged, auth.MaxFirstLines)
	}
	r.clock.Advance(time.Minute)
	r.t.Sweep(context.Background())
	var star map[string]any
	for _, l := range r.buf.Lines(t) {
		if l["remote_addr"] == "*" {
			star = l
		}
	}
	if star == nil || star["sources"] != float64(20000-auth.MaxFirstLines) {
		t.Errorf("the line of unlogged sources %v, want %d sources", star, 20000-auth.MaxFirstLines)
	}

	var last auth.Verdict
	for i := range 2000 {
		last = r.t.Failure(context.Background(), "192.0.2.1:1", wrong(50000+i), true)
	}
	if last.RetryAfter == 0 {
		t.Error("one address rotating 2000 prefixes (capacity 500) is not throttled")
	}
	if n := r.t.Len(); n > 501 {
		t.Errorf("the throttle remembers %d, want at most 500 prefixes and the one address", n)
	}
}

// TestSourceOf: an address without its port; IPv6 per /64; IPv4-mapped as
// IPv4; anything else as it is.
func TestSourceOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:8080":                    "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443":        "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":        "2001:db8:1:2::/64",
		"[::ffff:192.0.2.9]:1":              "192.0.2.9",
		"[fe80::1%eth0]:22":                 "fe80::/64",
		"@":                                 "@",
		"":                                  "",
		"not an address:1":                  "not an address:1",
		"2001:db8::1":                       "2001:db8::/64",
		"[2001:db8:aaaa:bbbb::1]:1":         "2001:db8:aaaa:bbbb::/64",
		"[2001:db8:aaaa:bbbc::1]:1":         "2001:db8:aaaa:bbbc::/64",
		"198.51.100.255:65535":              "198.51.100.255",
		"[::1]:9090":                        "::/64",
		"127.0.0.1:9090":                    "127.0.0.1",
		"[2001:db8:0:0:8:800:200c:417a]:80": "2001:db8::/64",
	} {
		if got := auth.SourceOf(in); got != want {
			t.Errorf("SourceOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnauditedFailuresTakeNoLine: a failed read (not audited) first does
// not take its source's one line: the audited failure after it writes it.
func TestUnauditedFailuresTakeNoLine(t *testing.T) {
	r := newThrottleRig(10, time.Minute, 100)
	if v := r.t.Failure(context.Background(), "192.0.2.8:1", wrong(0), false); v.Log {
		t.Fatalf("unaudited failure: %+v, want no line", v)
	}
	if v := r.t.Failure(context.Background(), "192.0.2.8:1", wrong(1), true); !v.Log {
		t.Fatalf("first audited failure after it: %+v, want its line", v)
	}
	if v := r.t.Failure(context.Background(), "192.0.2.8:1", wrong(2), true); v.Log {
		t.Fatalf("second audited failure: %+v, want no line", v)
	}
}

// TestNilThrottle: a nil throttle throttles nothing and logs every audited
// failure.
func TestNilThrottle(t *testing.T) {
	var none *auth.LoginThrottle
	for i := range 50 {
		if v := none.Failure(context.Background(), "192.0.2.1:1", "Bearer x", i%2 == 0); v.RetryAfter != 0 || v.Log != (i%2 == 0) {
			t.Fatalf("nil throttle: %+v", v)
		}
	}
	none.Sweep(context.Background())
	if none.Len() != 0 {
		t.Error("nil throttle remembers something")
	}
}

// TestThrottleRepeatedLinesAreBounded: 300 sources, two wrong tokens each
// (new prefixes, so no prefix is throttled), rotating addresses as an
// attacker with a /16 would: once the window ends the audit log holds at
// most 100 first lines and 100 per-source "repeated" lines, and one line
// that counts the rest — 200 sources, 400 failures — not 600 lines.
func TestThrottleRepeatedLinesAreBounded(t *testing.T) {
	r := newThrottleRig(10, time.Minute, 10000)
	for round := range 2 {
		for i := range 300 {
			addr := "10.1." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255) + ":1"
			r.t.Failure(context.Background(), addr, wrong(round*1000+i), true)
		}
	}
	r.clock.Advance(time.Minute)
	r.t.Sweep(context.Background())
	repeated, star := 0, []map[string]any{}
	for _, l := range r.buf.Lines(t) {
		switch {
		case l["remote_addr"] == "*":
			star = append(star, l)
		case l["result"] == "unauthorized_repeated":
			repeated++
		}
	}
	if repeated != auth.MaxFirstLines {
		t.Errorf("%d per-source repeated lines, want %d", repeated, auth.MaxFirstLines)
	}
	if len(star) != 1 || star[0]["repeated_sources"] != 200.0 || star[0]["failures"] != 400.0 {
		t.Errorf("lines counting the rest %v, want one: 200 repeated sources, 400 failures", star)
	}
	if n := len(r.buf.Lines(t)); n > 2*auth.MaxFirstLines+1 {
		t.Errorf("%d audit lines for 600 failures, want at most %d", n, 2*auth.MaxFirstLines+1)
	}
}
