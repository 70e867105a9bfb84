package main

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestDryRunAndConfirmationSayWhatTheRunDoes: with one of three dead
// letters already replayed, the dry run lists it as skipped
// (already_replayed) and counts 2 that would be sent; the question quotes
// 2 of 3; the real run sends exactly those 2. A rerun with nothing left to
// do exits 0 and says so, asked or not.
func TestDryRunAndConfirmationSayWhatTheRunDoes(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 3, time.Second)
	p.up.ok.Store(true)
	p.ctl(t, "", "replay", pay[0].id).want(t, exitOK, "replayed "+pay[0].id)
	p.idle(t, "pay-api")
	before := len(p.up.received())

	r := p.ctl(t, "", "replay", "--endpoint", "pay-api", "--dry-run")
	r.want(t, exitOK, "dry run: 2 of 3 dead letters would be replayed", "1 would not (already_replayed 1)",
		"skipped (already_replayed)", "would_send")
	r = p.ctl(t, "y\n", "replay", "--endpoint", "pay-api", "--rate", "1000")
	r.want(t, exitOK, "2 of 3 sent", "already_replayed 1")
	if !strings.Contains(r.stderr, "Replay 2 of 3 matching dead letters (of pay-api") ||
		!strings.Contains(r.stderr, "1 are skipped: already_replayed 1") {
		t.Fatalf("the question does not quote what will be sent:\n%s", r.stderr)
	}
	p.idle(t, "pay-api")
	if got := countKeys(p.up.received()[before:]); len(got) != 2 || got["pay-1"] != 1 || got["pay-2"] != 1 {
		t.Fatalf("the real run sent %v, want pay-1 and pay-2 once", got)
	}

	// Nothing left: exit 0, and said.
	r = p.ctl(t, "", "replay", "--endpoint", "pay-api")
	r.want(t, exitOK)
	if !strings.Contains(r.stderr, "nothing to replay: none of the 3 matching dead letters would be sent (already_replayed 3)") {
		t.Fatalf("rerun, asked:\n%s", r.stderr)
	}
	p.ctl(t, "", "replay", "--endpoint", "pay-api", "--yes", "--rate", "1000").want(t, exitOK,
		"0 of 3 sent", "already_replayed 3", "nothing left to replay")
	if n := len(p.up.received()) - before; n != 2 {
		t.Fatalf("reruns sent %d more requests", n-2)
	}
}

// TestExitFiveOnlyForWhatShouldHaveBeenSent: dead letters of a disabled
// endpoint are refused, so a bulk replay over them is partial (exit 5),
// while the same replay after re-enabling goes through (exit 0), and the
// already replayed ones are then plain skips.
func TestExitFiveOnlyForWhatShouldHaveBeenSent(t *testing.T) {
	p := startProxy(t)
	p.seedDeadLetters(t, "pay-api", "pay", 1, time.Second)
	p.seedDeadLetters(t, "crm-api", "crm", 2, time.Second)
	p.up.ok.Store(true)
	p.ctl(t, "", "endpoints", "disable", "crm-api", "--yes").want(t, exitOK)
	r := p.ctl(t, "", "replay", "--since", "1h", "--yes", "--rate", "1000")
	r.want(t, exitPartial, "1 of 3 sent", "endpoint_disabled 2")
	if !strings.Contains(r.stderr, "partially done: 2 refused, 0 failed of 3") {
		t.Fatalf("stderr:\n%s", r.stderr)
	}
	p.ctl(t, "", "endpoints", "enable", "crm-api").want(t, exitOK)
	p.ctl(t, "", "replay", "--since", "1h", "--yes", "--rate", "1000").want(t, exitOK, "2 of 3 sent",
		"already_replayed 1")
}

// TestDeadLettersListShowsReplayOutcome: the REPLAY column says what
// became of each replay — succeeded, failed again, pending — and
// --unresolved leaves out only the succeeded ones.
func TestDeadLettersListShowsReplayOutcome(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 3, time.Second)
	// pay-0's replay fails again (the upstream still refuses).
	p.ctl(t, "", "replay", pay[0].id).want(t, exitOK)
	p.idle(t, "pay-api")
	p.up.ok.Store(true)
	// pay-1's replay succeeds; pay-2 is never replayed.
	p.ctl(t, "", "replay", pay[1].id).want(t, exitOK)
	p.idle(t, "pay-api")
	r := p.ctl(t, "", "dead-letters", "list", "--endpoint", "pay-api")
	r.want(t, exitOK, "REPLAY")
	wantCell := map[string]string{pay[0].id: "failed again", pay[1].id: "succeeded", pay[2].id: "-"}
	for _, line := range strings.Split(r.stdout, "\n") {
		for id, cell := range wantCell {
			if strings.HasPrefix(line, id) && !strings.HasSuffix(strings.TrimSpace(line), cell) {
				t.Fatalf("%s: line %q, want REPLAY %q", id, line, cell)
			}
		}
	}
	u := p.ctl(t, "", "dead-letters", "list", "--endpoint", "pay-api", "--unresolved")
	u.want(t, exitOK, pay[0].id, pay[2].id)
	if strings.Contains(u.stdout, pay[1].id) {
		t.Fatalf("--unresolved lists the succeeded replay:\n%s", u.stdout)
	}
	// The failed replay is a dead letter of its own, unresolved too: 4 rows
	// in all (header, pay-0, pay-2, pay-0's failed replay).
	if n := strings.Count(u.stdout, "\n"); n != 4 {
		t.Fatalf("--unresolved:\n%s", u.stdout)
	}
	p.ctl(t, "", "dead-letters", "get", pay[0].id).want(t, exitOK, "replay outcome", "failed again")
}

// TestTablesFit100Columns: every table fits 100 columns by default with
// realistic values (24-character ids, endpoint names, reasons, times); -o
// wide adds the long columns.
func TestTablesFit100Columns(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 2, time.Second)
	p.seedDeadLetters(t, "crm-api", "crm", 1, time.Second)
	p.ctl(t, "", "endpoints", "disable", "crm-api", "--yes", "--reason", "a long maintenance window reason").want(t, exitOK)
	p.ctl(t, "", "replay", pay[0].id).want(t, exitOK)
	p.idle(t, "pay-api")
	fit := func(args ...string) {
		t.Helper()
		r := p.ctl(t, "", args...)
		r.want(t, exitOK)
		for _, line := range strings.Split(r.stdout, "\n") {
			if n := utf8.RuneCountInString(line); n > maxColumns {
				t.Fatalf("%v: a %d-column line:\n%s", args, n, r.stdout)
			}
		}
	}
	fit("dead-letters", "list")
	fit("dead-letters", "get", pay[0].id)
	fit("endpoints", "list")
	fit("replay-jobs", "list")
	fit("replay", "--endpoint", "pay-api", "--dry-run")
	fit("callouts", "list", "--endpoint", "pay-api")
	w := p.ctl(t, "", "-o", "wide", "dead-letters", "list")
	w.want(t, exitOK, "IDEMPOTENCY-KEY", "LAST-ERROR", "POST /v1/charges", "pay-1")
}

// TestDeadLetterGetShowsTheLastResponseBody: `dead-letters get` prints
// the last response's body with its size; a long one is cut in -o table
// (saying how much is shown) and whole in -o wide.
func TestDeadLetterGetShowsTheLastResponseBody(t *testing.T) {
	p := startProxy(t)
	short := p.seedDeadLetters(t, "pay-api", "short", 1, time.Second)[0]
	long := `{"error":"` + strings.Repeat("x", 3000) + `"}`
	p.up.failBody.Store(&long)
	big := p.seedDeadLetters(t, "pay-api", "long", 1, time.Second)[0]

	// http.Error adds a newline: the stored body is the text plus one byte.
	p.ctl(t, "", "dead-letters", "get", short.id).want(t, exitOK, "last response body (26 bytes):",
		`{"error":"card declined"}`, "400, body 26 bytes")
	r := p.ctl(t, "", "dead-letters", "get", big.id)
	r.want(t, exitOK, "last response body (3013 bytes):", "(1024 of 3013 bytes shown; -o wide or -o json shows it all)")
	if strings.Contains(r.stdout, long) {
		t.Fatal("the long body was printed whole in -o table")
	}
	p.ctl(t, "", "-o", "wide", "dead-letters", "get", big.id).want(t, exitOK, long)
}

// TestCalloutsListByState: held callouts (behind a pause) can be listed,
// not only counted, and `callouts get` says the pause holds them; scheduled and in_flight are empty then; a bad state
// or an unknown endpoint are errors with their exit codes; without
// --endpoint every endpoint with a backlog is listed.
func TestCalloutsListByState(t *testing.T) {
	p := startProxy(t)
	if _, err := p.store.RecordResult(t.Context(), "pay-api", policy.ReadResult{PausedUntil: p.clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	a, b := p.submit(t, "pay-api", "held-0"), p.submit(t, "pay-api", "held-1")
	p.ctl(t, "", "callouts", "list", "--endpoint", "pay-api", "--state", "held").want(t, exitOK, a, b, "held",
		"POST /v1/charges")
	// which gate holds it (contract §12 held_by): the endpoint's pause
	p.ctl(t, "", "callouts", "get", a).want(t, exitOK, "held by", "paused, endpoint, until")
	for _, st := range []string{"scheduled", "in_flight"} {
		r := p.ctl(t, "", "callouts", "list", "--endpoint", "pay-api", "--state", st)
		r.want(t, exitOK)
		if strings.Contains(r.stdout, a) || !strings.Contains(r.stderr, "no pending callouts match") {
			t.Fatalf("--state %s:\n%s%s", st, r.stdout, r.stderr)
		}
	}
	r := p.ctl(t, "", "-o", "json", "callouts", "list", "--endpoint", "pay-api", "--limit", "1", "--all")
	r.want(t, exitOK, a, b, `"state": "held"`)
	p.ctl(t, "", "callouts", "list", "--endpoint", "pay-api", "--state", "failed").want(t, exitUsage)
	p.ctl(t, "", "callouts", "list").want(t, exitOK, a, b) // every endpoint with a backlog
	p.ctl(t, "", "callouts", "list", "--endpoint", "nosuch").want(t, exitNotFound)
}

// TestReplayIntoAShutGateWarns: a replay into a paused endpoint, or one
// whose breaker is open, warns that it is held, not sent.
func TestReplayIntoAShutGateWarns(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 3, time.Second)
	if _, err := p.store.RecordResult(t.Context(), "pay-api", policy.ReadResult{PausedUntil: p.clk.Now().Add(90 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	r := p.ctl(t, "", "replay", pay[0].id)
	r.want(t, exitOK, "(held)")
	if !strings.Contains(r.stderr, "warning: pay-api is paused by a 429 Retry-After until ") ||
		!strings.Contains(r.stderr, "(in 1m30s): its replays are held, not sent, until then") {
		t.Fatalf("no warning:\n%s", r.stderr)
	}
	r = p.ctl(t, "", "replay", "--endpoint", "pay-api", "--dry-run")
	r.want(t, exitOK, "would_send (held)")
	if !strings.Contains(r.stderr, "warning: pay-api is paused") {
		t.Fatalf("the dry run does not warn:\n%s", r.stderr)
	}
	r = p.ctl(t, "", "replay", pay[1].id, pay[2].id, "--yes", "--rate", "1000")
	r.want(t, exitOK, "2 of 2 sent")
	if !strings.Contains(r.stderr, "warning: pay-api is paused") {
		t.Fatalf("the bulk replay does not warn:\n%s", r.stderr)
	}
}

// TestDiscardAsksOnATerminal: one id typed on a terminal is confirmed too;
// declining discards nothing (exit 4); a script (no terminal) is not
// asked; a refusal is printed once.
func TestDiscardAsksOnATerminal(t *testing.T) {
	p := startProxy(t)
	d := p.seedDeadLetters(t, "pay-api", "pay", 2, time.Second)
	r := p.ctlWith(t, true, "n\n", &proctest.LogBuffer{}, "dead-letters", "discard", d[0].id)
	r.want(t, exitRefused)
	if !strings.Contains(r.stderr, "Discard dead letter "+d[0].id+"? This deletes the proxy's copy. [y/N]") {
		t.Fatalf("no question:\n%s", r.stderr)
	}
	p.ctl(t, "", "dead-letters", "get", d[0].id).want(t, exitOK)
	p.ctlWith(t, true, "y\n", &proctest.LogBuffer{}, "dead-letters", "discard", d[0].id).want(t, exitOK, "discarded "+d[0].id)
	p.ctl(t, "", "dead-letters", "discard", d[1].id).want(t, exitOK, "discarded "+d[1].id)
	r = p.ctl(t, "", "dead-letters", "discard", d[1].id)
	r.want(t, exitNotFound)
	if n := strings.Count(r.stderr, "no such dead letter"); n != 1 {
		t.Fatalf("the refusal is printed %d times:\n%s", n, r.stderr)
	}
}

// TestOperatorErrors: a mistyped command or flag gets the closest name; an
// unknown endpoint is exit 3 for listings and replays as for endpoint
// actions; a superseded replay names the newer dead letter (no
// placeholder); status filters print as numbers.
func TestOperatorErrors(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 1, time.Second)
	for args, want := range map[string]string{
		"dead-leters list":                   `no such command "dead-leters": did you mean "dead-letters"?`,
		"dead-letters lst":                   `no such command "lst": did you mean "list"?`,
		"replay-job list":                    `did you mean "replay-jobs"?`,
		"dead-letters list --endpiont x":     "did you mean --endpoint?",
		"replay --endpoint pay-api --dryrun": "did you mean --dry-run?",
	} {
		r := p.ctl(t, "", strings.Fields(args)...)
		r.want(t, exitUsage)
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("%s: stderr lacks %q:\n%s", args, want, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"dead-letters", "list", "--endpoint", "nosuch"},
		{"replay", "--endpoint", "nosuch", "--yes"},
		{"replay", "--endpoint", "nosuch", "--dry-run"},
		{"endpoints", "disable", "nosuch", "--yes"},
	} {
		r := p.ctl(t, "", args...)
		r.want(t, exitNotFound)
		if !strings.Contains(r.stderr, "nosuch") {
			t.Fatalf("%v: stderr %s", args, r.stderr)
		}
	}
	// pay-0's replay fails again: pay-0 is superseded by it.
	r := p.ctl(t, "", "replay", pay[0].id)
	r.want(t, exitOK)
	newer := strings.Fields(strings.TrimPrefix(r.stdout, "replayed "+pay[0].id+" as "))[0]
	p.idle(t, "pay-api")
	r = p.ctl(t, "", "replay", pay[0].id)
	r.want(t, exitRefused)
	if !strings.Contains(r.stderr, "newer dead letter, "+newer+"; replay that one") || strings.Contains(r.stderr, "(callout_id)") {
		t.Fatalf("superseded:\n%s", r.stderr)
	}
	r = p.ctl(t, "n\n", "replay", "--endpoint", "pay-api", "--status", "400", "--status", "503")
	if !strings.Contains(r.stderr, "status 400, 503") || strings.Contains(r.stderr, "[400") {
		t.Fatalf("status list:\n%s", r.stderr)
	}
	p.ctl(t, "", "completion", "bash").want(t, exitOK, "complete", "calloutctl")
	p.ctl(t, "", "version").want(t, exitOK, "calloutctl ", "go1.")
	p.ctl(t, "", "--help").want(t, exitOK, "completion", "version", "callouts")
}
