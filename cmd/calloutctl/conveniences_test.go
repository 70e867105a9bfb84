package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestWhen: table cells show times to the second, relative within a day
// of now ("in 12s", "3m ago"), the date and time beyond it, RFC 3339 in -o
// wide; `get` fields show both.
func TestWhen(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	a := &app{now: func() time.Time { return now }}
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"}, {12 * time.Second, "in 12s"}, {-3 * time.Minute, "3m ago"}, {185 * time.Second, "in 3m5s"},
		{-(time.Hour + 5*time.Second), "1h0m5s ago"}, {2*time.Hour + 30*time.Minute, "in 2h30m"},
		{1400 * time.Millisecond, "in 1s"}, {23*time.Hour + 59*time.Minute + 59*time.Second, "in 23h59m59s"},
		{-25 * time.Hour, "2026-03-01 08:00:00"}, {48*time.Hour + 7*time.Second, "2026-03-04 09:00:07"},
	} {
		if got := a.when(false, now.Add(tt.d)); got != tt.want {
			t.Errorf("when(now%+v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := a.when(true, now.Add(12*time.Second)); got != "2026-03-02T09:00:12Z" {
		t.Errorf("wide when = %q", got)
	}
	if got := a.stamp(now.Add(-3 * time.Minute)); got != "2026-03-02T08:57:00Z (3m ago)" {
		t.Errorf("stamp = %q", got)
	}
	if got := a.when(false, time.Time{}); got != "" {
		t.Errorf("when(zero) = %q, want empty", got)
	}
}

// TestListsShowSecondsAndRelativeTimes: `dead-letters list` shows how long
// ago each became a dead letter, to the second, on the proxy's clock; the
// replay job's creation too.
func TestListsShowSecondsAndRelativeTimes(t *testing.T) {
	p := startProxy(t)
	p.seedDeadLetters(t, "pay-api", "rel", 1, 0)
	p.clk.Advance(3*time.Minute + 7*time.Second)
	p.ctl(t, "", "dead-letters", "list").want(t, exitOK, "3m7s ago")
	p.ctl(t, "", "-o", "wide", "dead-letters", "list").want(t, exitOK, p.clk.Now().Add(-187*time.Second).UTC().Format(time.RFC3339))
}

// TestDeadlettersIsAnAlias: `deadletters` is `dead-letters`.
func TestDeadlettersIsAnAlias(t *testing.T) {
	p := startProxy(t)
	d := p.seedDeadLetters(t, "pay-api", "alias", 1, time.Second)
	p.ctl(t, "", "deadletters", "list").want(t, exitOK, d[0].id)
	p.ctl(t, "", "deadletters", "get", d[0].id).want(t, exitOK, "dead letter reason", "permanent")
}

// begin records an in-flight callout of endpoint, leased for an hour on
// the proxy's clock (the synchronous path's Begin, whose attempt this test
// never makes), and returns its id.
func (p *proxyEnv) begin(t *testing.T, endpoint, key string) string {
	t.Helper()
	res, err := p.store.Begin(t.Context(), policy.NewCallout{Endpoint: endpoint, Issuer: testIssuer, Method: "POST",
		Path: "/v1/charges", Body: []byte(`{}`), IdempotencyKey: key, Header: http.Header{}},
		policy.BeginOptions{Lease: time.Hour})
	if err != nil || res.Claimed == nil {
		t.Fatalf("begin %s: %+v %v", key, res, err)
	}
	return res.Claimed.ID
}

// TestCalloutsListAcrossEndpoints: without --endpoint, `callouts list`
// lists the pending callouts of every endpoint with a backlog, naming the
// endpoint of each, lease ends relative to now; --endpoint narrows it.
func TestCalloutsListAcrossEndpoints(t *testing.T) {
	p := startProxy(t)
	pay, crm := p.begin(t, "pay-api", "across-1"), p.begin(t, "crm-api", "across-2")
	r := p.ctl(t, "", "callouts", "list")
	r.want(t, exitOK, pay, crm, "pay-api", "crm-api", "in_flight", "in 1h")
	one := p.ctl(t, "", "callouts", "list", "--endpoint", "crm-api")
	one.want(t, exitOK, crm)
	if strings.Contains(one.stdout, pay) {
		t.Errorf("--endpoint crm-api lists pay-api's %s:\n%s", pay, one.stdout)
	}
	p.ctl(t, "", "callouts", "list", "--cursor", "5").want(t, exitUsage)
}

// TestWatchRedraws: --watch draws the list, then again on each tick of
// the (injected) ticker with fresh data — a disable between two ticks
// shows in the next frame — and Ctrl-C (the context ending) stops it with
// exit 0. -o json and a too short --interval are usage errors.
func TestWatchRedraws(t *testing.T) {
	p := startProxy(t)
	ticks := make(chan time.Time)
	var out proctest.LogBuffer
	env := map[string]string{envServer: p.admin, envToken: opsToken}
	a := newApp(func(k string) string { return env[k] }, strings.NewReader(""), &out, &proctest.LogBuffer{})
	a.now, a.isTerminal = p.clk.Now, func(any) bool { return false }
	var every time.Duration
	a.ticker = func(d time.Duration) (<-chan time.Time, func()) { every = d; return ticks, func() {} }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx, []string{"endpoints", "list", "--watch", "--interval", "5s"}) }()

	// A tick is taken only once the frame before it is drawn; the next
	// frame starts at once.
	ticks <- time.Time{} // frame 1 drawn
	p.ctl(t, "", "endpoints", "disable", "crm-api", "--yes").want(t, exitOK)
	ticks <- time.Time{} // frame 2 drawn (begun before or after the disable)
	ticks <- time.Time{} // frame 3, begun after the disable, drawn
	cancel()
	if err := <-done; exitCode(err) != exitOK {
		t.Fatalf("watch ended with %v, want exit 0 on Ctrl-C", err)
	}
	frames := strings.Split(out.String(), "Every 5s: calloutctl endpoints list")
	if len(frames) < 4 || every != 5*time.Second {
		t.Fatalf("%d frames at %s, want at least 3 at 5s:\n%s", len(frames)-1, every, out.String())
	}
	gate := func(frame string) string {
		for _, line := range strings.Split(frame, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "crm-api" {
				return f[1]
			}
		}
		return ""
	}
	if gate(frames[1]) != "open" || gate(frames[3]) != "disabled" {
		t.Errorf("frame 1 should show crm-api open, frame 3 disabled:\n%s", out.String())
	}
	p.ctl(t, "", "-o", "json", "dead-letters", "list", "--watch").want(t, exitUsage)
	p.ctl(t, "", "replay-jobs", "list", "--watch", "--interval", "10ms").want(t, exitUsage)
	// A value given to a flag that takes none is an argument: refused, not dropped.
	p.ctl(t, "", "callouts", "list", "--watch", "2s").want(t, exitUsage)
	p.ctl(t, "", "endpoints", "list", "extra").want(t, exitUsage)
}

// TestCompleteFromTheServer: `__complete` (what the completion scripts
// call) completes commands and flags, flag values (after "--flag " or
// "--flag="), and endpoint names,
// dead-letter ids and replay job ids read from the server given in the
// environment or on the line; nothing, not an error, when the server is
// unreachable.
func TestCompleteFromTheServer(t *testing.T) {
	p := startProxy(t)
	d := p.seedDeadLetters(t, "pay-api", "comp", 2, time.Second)
	p.ctl(t, "", "replay", d[0].id, d[1].id, "--yes").want(t, exitOK)
	var jobs api.ReplayJobList
	if err := json.Unmarshal([]byte(p.ctl(t, "", "-o", "json", "replay-jobs", "list").stdout), &jobs); err != nil ||
		len(jobs.Jobs) != 1 {
		t.Fatalf("replay-jobs list: %+v %v", jobs, err)
	}
	job := jobs.Jobs[0].ID
	p.idle(t, "pay-api") // the replays, refused again, are dead letters too
	env := map[string]string{envServer: p.admin, envToken: opsToken}
	complete := func(env map[string]string, words ...string) []string {
		a := newApp(func(k string) string { return env[k] }, strings.NewReader(""), &proctest.LogBuffer{},
			&proctest.LogBuffer{})
		return a.completions(t.Context(), words)
	}
	for _, tt := range []struct {
		words []string
		want  []string
	}{
		{[]string{""}, []string{"dead-letters", "replay", "replay-jobs", "endpoints", "callouts", "version", "completion"}},
		{[]string{"replay-"}, []string{"replay-jobs"}},
		{[]string{"endpoints", "enable", ""}, []string{"crm-api", "pay-api"}},
		{[]string{"endpoints", "reset", "p"}, []string{"pay-api"}},
		{[]string{"dead-letters", "list", "--endpoint", ""}, []string{"crm-api", "pay-api"}},
		{[]string{"dead-letters", "list", "--endpoint=p"}, []string{"--endpoint=pay-api"}},
		{[]string{"-o=w"}, []string{"-o=wide"}},
		{[]string{"deadletters", "list", "--reason", "e"}, []string{"exhausted", "endpoint_disabled"}},
		{[]string{"-o", ""}, []string{"table", "wide", "json"}},
		{[]string{"replay", d[0].id[:len(d[0].id)-1]}, []string{d[0].id}},
		{[]string{"replay-jobs", "cancel", ""}, []string{job}},
		{[]string{"callouts", "list", "--st"}, []string{"--state"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}},
	} {
		got := complete(env, tt.words...)
		slices.Sort(got)
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("complete %q = %q, want %q", tt.words, got, want)
		}
	}
	if got := complete(env, "dead-letters", "get", ""); len(got) != 4 || !slices.Contains(got, d[0].id) ||
		!slices.Contains(got, d[1].id) {
		t.Errorf("dead-letters get <TAB> = %q, want the 2 dead letters and their 2 failed replays", got)
	}
	onLine := complete(map[string]string{}, "--server", p.admin, "--token", opsToken, "endpoints", "disable", "")
	if !slices.Equal(onLine, []string{"crm-api", "pay-api"}) {
		t.Errorf("with --server and --token on the line: %q", onLine)
	}
	if got := complete(map[string]string{envServer: "http://127.0.0.1:1", envToken: "x"}, "endpoints", "enable", ""); len(got) != 0 {
		t.Errorf("unreachable server: %q, want nothing", got)
	}
}

// TestTheBinaryCompletesAndWatches: the real binary's bash script, loaded
// into a bare bash (no rc files, no bash-completion package), completes
// endpoint names from the server for `calloutctl endpoints enable <TAB>`
// and `--endpoint=c<TAB>`,
// and subcommands for `calloutctl dead<TAB>`; the zsh and fish scripts
// ask the same command. `endpoints list --watch` draws its first frame and
// Ctrl-C (SIGINT) ends it with exit 0.
func TestTheBinaryCompletesAndWatches(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	p := startProxy(t)
	bin := buildCalloutctl(t)
	script := filepath.Join(t.TempDir(), "calloutctl.bash")
	r := runBin(t, bin, nil, "completion", "bash")
	if r.code != 0 || os.WriteFile(script, []byte(r.stdout), 0o600) != nil {
		t.Fatalf("completion bash: %+v", r)
	}
	tab := func(line string) string {
		t.Helper()
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", `source "$1"; COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}
declare -F _get_comp_words_by_ref _init_completion >/dev/null && echo "bash-completion is loaded" >&2
_calloutctl; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script, line)
		cmd.Env = []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), envServer + "=" + p.admin,
			envToken + "=" + opsToken}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "bash-completion") {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := tab("calloutctl endpoints enable "); got != "crm-api\npay-api" {
		t.Errorf("endpoints enable <TAB> = %q", got)
	}
	// bash breaks the word at "=" (COMP_WORDBREAKS): it wants the value only.
	if got := tab("calloutctl dead-letters list --endpoint=c"); got != "crm-api" {
		t.Errorf("--endpoint=c<TAB> = %q", got)
	}
	if got := tab("calloutctl dead"); got != "dead-letters" {
		t.Errorf("dead<TAB> = %q", got)
	}
	for _, sh := range []string{"zsh", "fish"} {
		if r := runBin(t, bin, nil, "completion", sh); r.code != 0 || !strings.Contains(r.stdout, "__complete") {
			t.Errorf("completion %s: %+v", sh, r)
		}
	}

	watch := exec.Command(bin, "endpoints", "list", "--watch")
	watch.Env = []string{"PATH=" + os.Getenv("PATH"), envServer + "=" + p.admin, envToken + "=" + opsToken}
	var out, errb proctest.LogBuffer
	watch.Stdout, watch.Stderr = &out, &errb
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first frame", func() bool { return strings.Contains(out.String(), "pay-api") })
	if err := watch.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := watch.Wait(); err != nil || !strings.Contains(out.String(), "Every 2s: calloutctl endpoints list") {
		t.Fatalf("--watch after Ctrl-C: %v (want exit 0)\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
}

// TestVocabularyInTheCLI: calloutctl shows the admin API's words of
// contract §12 unchanged: each endpoint's GATE is its gate (open when
// healthy, disabled after a disable), the breaker only in -o wide under
// BREAKER; a dead letter's `get` shows its state, dead letter reason and
// last attempt (the document's last_outcome, in contract §12's words, as
// the console says it) as the admin API's document has them.
func TestVocabularyInTheCLI(t *testing.T) {
	p := startProxy(t)
	d := p.seedDeadLetters(t, "pay-api", "words", 1, time.Second)[0]
	p.ctl(t, "", "endpoints", "disable", "crm-api", "--yes").want(t, exitOK)
	var l api.EndpointList
	if err := json.Unmarshal([]byte(p.ctl(t, "", "-o", "json", "endpoints", "list").stdout), &l); err != nil {
		t.Fatal(err)
	}
	table := p.ctl(t, "", "endpoints", "list").stdout
	wide := p.ctl(t, "", "-o", "wide", "endpoints", "list").stdout
	if strings.Contains(table, "BREAKER") || !strings.Contains(wide, "BREAKER") {
		t.Errorf("BREAKER belongs to -o wide only:\n%s\n%s", table, wide)
	}
	gates := map[string]string{}
	for _, line := range strings.Split(table, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 {
			gates[f[0]] = f[1]
		}
	}
	for _, e := range l.Endpoints {
		if gates[e.Name] != string(e.Gate) {
			t.Errorf("%s: GATE %q, the admin API's gate %q", e.Name, gates[e.Name], e.Gate)
		}
	}
	if gates["pay-api"] != string(policy.GateOpen) || gates["crm-api"] != string(policy.GateDisabled) {
		t.Errorf("gates %v, want pay-api open and crm-api disabled", gates)
	}
	var doc api.CalloutDoc
	if err := json.Unmarshal([]byte(p.ctl(t, "", "-o", "json", "dead-letters", "get", d.id).stdout), &doc); err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(p.ctl(t, "", "dead-letters", "get", d.id).stdout, "\n") {
		if k, v, ok := strings.Cut(line, "  "); ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if fields["state"] != string(doc.State) || fields["dead letter reason"] != doc.DeadLetterReason ||
		fields["last attempt"] != string(doc.LastOutcome) || fields["last outcome"] != "" || doc.LastOutcome != policy.Permanent ||
		doc.DeadLetterReason != string(policy.DeadLetterPermanent) {
		t.Errorf("get shows %v; the admin API's document: state %s, reason %s, last_outcome %s", fields,
			doc.State, doc.DeadLetterReason, doc.LastOutcome)
	}
}

// TestYesOnEveryChange: every command that changes something takes --yes,
// so a script can pass it to each: the ones that may ask first (disable,
// discard, several ids or a filter to replay) do not ask, the others
// accept it and do their work; none is a usage error. And every command
// of the tree that takes a NAME or ID and is not a read has the flag.
func TestYesOnEveryChange(t *testing.T) {
	p := startProxy(t)
	d := p.seedDeadLetters(t, "pay-api", "yes", 3, time.Second)
	p.ctl(t, "", "replay", d[0].id, d[1].id, "--yes", "--no-wait").want(t, exitOK)
	var jobs api.ReplayJobList
	if err := json.Unmarshal([]byte(p.ctl(t, "", "-o", "json", "replay-jobs", "list").stdout), &jobs); err != nil ||
		len(jobs.Jobs) != 1 {
		t.Fatalf("replay-jobs list: %+v %v", jobs, err)
	}
	for _, args := range [][]string{
		{"endpoints", "enable", "pay-api", "--yes"},
		{"endpoints", "reset", "pay-api", "-y"},
		{"endpoints", "disable", "crm-api", "--yes"},
		{"dead-letters", "discard", d[2].id, "--yes"},
		{"replay-jobs", "cancel", jobs.Jobs[0].ID, "--yes"},
		{"replay", "--endpoint", "pay-api", "--dry-run", "--yes"},
	} {
		r := p.ctl(t, "", args...)
		if r.code == exitUsage || strings.Contains(r.stderr, "[y/N]") {
			t.Errorf("%v: exit %d, stderr %q; want --yes accepted and no question", args, r.code, r.stderr)
		}
	}
	reads := map[string]bool{"list": true, "get": true, "version": true}
	forEachCommand(newApp(nil, nil, nil, nil).command(), func(c *cli.Command) {
		if len(c.Commands) > 0 || reads[c.Name] || c.Hidden || c.Name == "bash" || c.Name == "zsh" || c.Name == "fish" ||
			c.Name == "help" {
			return
		}
		if flagNamed([]*cli.Command{c}, "yes") == nil {
			t.Errorf("%s changes something but takes no --yes", c.Name)
		}
	})
}
