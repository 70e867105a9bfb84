package auth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// LoginThrottle throttles failed admin-token checks (the admin API's 401s
// and the console's failed logins) per source address and per presented
// token prefix, and collapses their audit lines (docs/limits.md, "Failed
// logins"). Within one window (limits.admin_login_window), a source or a
// prefix that failed more than limits.admin_login_failures times is
// throttled: its further failures are answered 429 with Retry-After (the
// rest of the window) instead of 401. A right token is always accepted,
// throttled or not (the caller checks the token first and tells the
// throttle only of failures), so an attacker sharing an address with the
// admin (a NAT, an ingress, a port-forward) cannot lock the admin out.
//
// Audit lines: the first audited failure of a source in a window is
// logged by the caller (Failure says when); the others are counted, and when the window
// is over one line per source says how many there were (msg "audit",
// result "unauthorized_repeated", failures, throttled). Past
// maxFirstLines first lines in a window, new sources are counted into one
// line (remote_addr "*") instead. Lapsed windows are written at the next
// check of any admin token (Failure or Sweep): the throttle runs no timer.
//
// Memory: at most capacity sources and capacity prefixes are remembered; a
// new one past it forgets the one of its kind whose window started first
// (writing its line), so an attacker rotating addresses or prefixes never
// grows it, and one rotating prefixes from one address never pushes that
// address out. IPv6 sources are counted per /64, the block one host is
// usually given.
//
// A nil *LoginThrottle throttles nothing and logs every audited failure. It is safe
// for concurrent use.
type LoginThrottle struct {
	failures int
	window   time.Duration
	capacity int
	now      func() time.Time
	logger   *slog.Logger
	observe  func(throttled bool) // Observe; nil: none

	mu      sync.Mutex
	entries map[throttleKey]*list.Element // of *throttleEntry
	order   [2]*list.List                 // per kind (source, prefix): oldest window first
	lines   firstLines
}

// firstLines counts the audit lines of the window that began at start:
// first-failure lines written, and suppressed past maxFirstLines; the
// sources' "repeated" lines (forget) written, and suppressed past
// maxFirstLines with their failures.
type firstLines struct {
	start                                  time.Time
	written, suppressed                    int
	repeated, repeatedSuppressed, failures int
}

// maxFirstLines bounds the first-failure audit lines of one window, and
// the per-source "repeated" lines, over all sources: an attacker rotating
// addresses gets one line for the rest.
const maxFirstLines = 100

// throttlePrefixBytes is how much of a presented token names its prefix.
const throttlePrefixBytes = 8

// throttleKey names what is counted: a source address (or IPv6 /64) or a
// token prefix's digest.
type throttleKey struct {
	kind int // kindSource or kindPrefix
	id   string
}

// The kinds of throttleKey.
const (
	kindSource = iota
	kindPrefix
)

// throttleEntry counts one key's failures in the window that began at
// start; throttled counts those answered 429.
type throttleEntry struct {
	key       throttleKey
	start     time.Time
	failures  int
	throttled int
	logged    bool // the caller wrote a line of this window
}

// NewLoginThrottle returns a throttle that allows failures failed checks
// per source and per token prefix in each window, remembers at most
// capacity sources and capacity prefixes, reads time from now and writes its collapsed audit
// lines to logger. failures, window and capacity must be positive
// (config.Limits validates them).
func NewLoginThrottle(failures int, window time.Duration, capacity int, now func() time.Time,
	logger *slog.Logger) *LoginThrottle {
	return &LoginThrottle{failures: failures, window: window, capacity: capacity, now: now, logger: logger,
		entries: map[throttleKey]*list.Element{}, order: [2]*list.List{list.New(), list.New()}}
}

// Observe sets what the throttle tells of every failure it counts: fn is
// called with true for a throttled one (answered 429) and false for the
// others (401), outside the throttle's lock; the composition root counts
// them (callout_admin_login_failures_total). Call it before the throttle
// is used. A nil fn observes nothing.
func (t *LoginThrottle) Observe(fn func(throttled bool)) {
	if t != nil {
		t.observe = fn
	}
}

// Verdict is what the throttle decided of one failure.
type Verdict struct {
	// RetryAfter, when positive, throttles the failure: answer 429 with
	// Retry-After of it in whole seconds (RetryAfterSeconds).
	RetryAfter time.Duration
	// Log says the caller writes this failure's own audit line: the first
	// audited failure of its source in the window.
	Log bool
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1
// (RFC 9110 §10.2.3 takes seconds).
func (v Verdict) RetryAfterSeconds() int {
	return max(1, int((v.RetryAfter+time.Second-1)/time.Second))
}

// Failure counts a failed check from remoteAddr (an http.Request's
// RemoteAddr) that presented authorization (the Authorization value; the
// console passes "Bearer " + the typed token) and returns its verdict. A
// missing or empty token counts for its source only. audited says the
// caller writes audit lines of such failures (admin writes and console
// logins do, admin reads do not): only then may the verdict ask for one,
// so a failed read never takes the place of a failed write's line.
func (t *LoginThrottle) Failure(ctx context.Context, remoteAddr, authorization string, audited bool) Verdict {
	if t == nil {
		return Verdict{Log: audited}
	}
	v := t.failure(ctx, remoteAddr, authorization, audited)
	if t.observe != nil {
		t.observe(v.RetryAfter > 0)
	}
	return v
}

// failure is Failure under the throttle's lock.
func (t *LoginThrottle) failure(ctx context.Context, remoteAddr, authorization string, audited bool) Verdict {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(ctx, now)
	src := t.count(ctx, throttleKey{kind: kindSource, id: SourceOf(remoteAddr)}, now)
	v := Verdict{Log: audited && !src.logged}
	src.logged = src.logged || audited
	over := []*throttleEntry{src}
	if p := tokenPrefix(authorization); p != "" {
		over = append(over, t.count(ctx, throttleKey{kind: kindPrefix, id: p}, now))
	}
	for _, e := range over {
		if e.failures > t.failures {
			v.RetryAfter = max(v.RetryAfter, e.start.Add(t.window).Sub(now))
		}
	}
	if v.RetryAfter > 0 {
		src.throttled++
	}
	if v.Log {
		t.roll(ctx, now)
		if t.lines.written < maxFirstLines {
			t.lines.written++
		} else {
			v.Log = false
			t.lines.suppressed++
		}
	}
	return v
}

// Sweep writes the audit lines of the windows that are over and forgets
// them; the admin API calls it on every accepted token, so a flood's last
// window is reported at the next admin request.
func (t *LoginThrottle) Sweep(ctx context.Context) {
	if t == nil {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(ctx, now)
}

// Len is the number of sources and prefixes remembered now.
func (t *LoginThrottle) Len() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// count adds one failure to key's entry, starting one (and forgetting the
// oldest at capacity) when it has none. t.mu is held.
func (t *LoginThrottle) count(ctx context.Context, key throttleKey, now time.Time) *throttleEntry {
	if el, ok := t.entries[key]; ok {
		e := el.Value.(*throttleEntry)
		e.failures++
		return e
	}
	order := t.order[key.kind]
	if order.Len() >= t.capacity {
		t.forget(ctx, order.Front(), now)
	}
	e := &throttleEntry{key: key, start: now, failures: 1}
	t.entries[key] = order.PushBack(e)
	return e
}

// sweep forgets every entry whose window is over, writing its line, and
// writes the line of suppressed first lines when its window is over.
// Windows have one length and start in order, so the oldest are in front.
// t.mu is held.
func (t *LoginThrottle) sweep(ctx context.Context, now time.Time) {
	for _, order := range t.order {
		for el := order.Front(); el != nil; el = order.Front() {
			if now.Before(el.Value.(*throttleEntry).start.Add(t.window)) {
				break
			}
			t.forget(ctx, el, now)
		}
	}
	if !t.lines.start.IsZero() && !now.Before(t.lines.start.Add(t.window)) {
		t.flushLines(ctx)
		t.lines = firstLines{}
	}
}

// roll starts the lines window at now when none is running or it is over,
// writing the over one's line first. t.mu is held.
func (t *LoginThrottle) roll(ctx context.Context, now time.Time) {
	if t.lines.start.IsZero() || !now.Before(t.lines.start.Add(t.window)) {
		t.flushLines(ctx)
		t.lines = firstLines{start: now}
	}
}

// flushLines writes the one line of the window's suppressed lines, if any:
// how many sources' first failures and how many sources' repeated-failure
// lines (with their failures) were not written. t.mu is held.
func (t *LoginThrottle) flushLines(ctx context.Context) {
	l := t.lines
	if l.suppressed == 0 && l.repeatedSuppressed == 0 {
		return
	}
	t.logger.LogAttrs(ctx, slog.LevelWarn, "audit", slog.String("token", ""),
		slog.String("action", "admin.login"), slog.String("result", "unauthorized_repeated"),
		slog.String("remote_addr", "*"), slog.Int("sources", l.suppressed),
		slog.Int("repeated_sources", l.repeatedSuppressed), slog.Int("failures", l.failures),
		slog.String("detail", "failed admin-token checks from further sources in this window: each one's "+
			"first failure (sources) and its repeated failures (repeated_sources, failures) not logged one by "+
			"one (at most 100 lines of each a window)"),
		slog.Time("window_start", l.start), slog.Duration("window", t.window))
}

// forget drops el's entry; a source's with more than one failure writes its
// audit line first, or, past maxFirstLines such lines in the window, is
// counted in the window's one line (flushLines). t.mu is held.
func (t *LoginThrottle) forget(ctx context.Context, el *list.Element, now time.Time) {
	e := t.order[el.Value.(*throttleEntry).key.kind].Remove(el).(*throttleEntry)
	delete(t.entries, e.key)
	if e.key.kind == kindPrefix || e.failures < 2 {
		return
	}
	if t.lines.start.IsZero() {
		t.lines.start = now // counted in the window under way; a sweep's in the one it ends
	}
	if t.lines.repeated >= maxFirstLines {
		t.lines.repeatedSuppressed++
		t.lines.failures += e.failures
		return
	}
	t.lines.repeated++
	t.logger.LogAttrs(ctx, slog.LevelWarn, "audit", slog.String("token", ""),
		slog.String("action", "admin.login"), slog.String("result", "unauthorized_repeated"),
		slog.String("remote_addr", e.key.id), slog.Int("failures", e.failures),
		slog.Int("throttled", e.throttled), slog.Time("window_start", e.start),
		slog.Duration("window", t.window))
}

// SourceOf is the source a failed check is counted for: the address of
// remoteAddr ("host:port", as http.Request.RemoteAddr holds it), an IPv6
// address as its /64 ("2001:db8:1:2::/64"), an IPv4-mapped one as IPv4;
// remoteAddr itself when it is not an address. The proxy trusts no
// forwarding header (X-Forwarded-For is a caller's claim), so behind a
// load balancer every caller has the balancer's address: the throttle then
// counts all of them as one source, which is why a right token is accepted
// even while its source is throttled.
func SourceOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return remoteAddr
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// tokenPrefix is the digest of the first throttlePrefixBytes of the token
// in authorization ("Bearer <token>"), "" without one. Only a digest is
// kept: a wrong token may be a mistyped right one.
func tokenPrefix(authorization string) string {
	scheme, tok, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return ""
	}
	d := sha256.Sum256([]byte(tok[:min(len(tok), throttlePrefixBytes)]))
	return string(d[:16])
}
