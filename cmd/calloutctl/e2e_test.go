package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// TestOperatorFindsAndReplaysWithCalloutctlAlone: list, inspect, replay,
// follow, refuse on a disabled endpoint, re-enable, discard — calloutctl
// only, against a whole proxy.
func TestOperatorFindsAndReplaysWithCalloutctlAlone(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 2, time.Second)
	crm := p.seedDeadLetters(t, "crm-api", "crm", 1, time.Second)
	p.up.ok.Store(true)

	p.ctl(t, "", "-o", "wide", "dead-letters", "list", "--endpoint", "pay-api").want(t, exitOK,
		"IDEMPOTENCY-KEY", pay[0].id, pay[1].id, "pay-0", "permanent", "400", "POST /v1/charges")
	var list api.DeadLetterList
	r := p.ctl(t, "", "-o", "json", "dead-letters", "list", "--status", "400", "--limit", "1", "--all")
	r.want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Items) != 3 {
		t.Fatalf("json list: %v\n%s", err, r.stdout)
	}
	p.ctl(t, "", "dead-letters", "get", pay[0].id).want(t, exitOK, "dead_lettered", "permanent", "pay-0", "first")

	r = p.ctl(t, "", "replay", pay[0].id)
	r.want(t, exitOK, "replayed "+pay[0].id+" as ")
	newID := strings.Fields(strings.TrimPrefix(r.stdout, "replayed "+pay[0].id+" as "))[0]
	eventually(t, "the replay succeeded", func() bool {
		return strings.Contains(p.ctl(t, "", "callouts", "get", newID).stdout, "succeeded")
	})
	p.ctl(t, "", "callouts", "get", newID).want(t, exitOK, "replay of", pay[0].id, "replay")
	// A finished callout keeps no request (contract §5): not "0 bytes".
	if out := p.ctl(t, "", "callouts", "get", newID).stdout; !strings.Contains(out, "(not kept once succeeded") ||
		strings.Contains(out, "0 bytes") {
		t.Errorf("callouts get of a success says of its request body:\n%s", out)
	}
	if out := p.ctl(t, "", "dead-letters", "get", pay[1].id).stdout; !strings.Contains(out, "request body        15 bytes") {
		t.Errorf("dead-letters get: the dead letter's body, kept whole:\n%s", out)
	}
	// Already replayed, and that replay succeeded: the end state asked for.
	p.ctl(t, "", "replay", pay[0].id).want(t, exitOK, pay[0].id+" was already replayed as "+newID+" (succeeded); nothing sent")
	// The chain's end is noted on the dead letter it replays right after the
	// chain's own completion (a second step: the two may live in different
	// slots), so the list may lag the callout by a moment.
	eventually(t, "the dead letter shows its replay succeeded", func() bool {
		return strings.Contains(p.ctl(t, "", "-o", "wide", "dead-letters", "list", "--endpoint", "pay-api").stdout, "succeeded")
	})
	p.ctl(t, "", "-o", "wide", "dead-letters", "list", "--endpoint", "pay-api").want(t, exitOK, newID, "succeeded") // REPLAYED-BY, REPLAY

	p.ctl(t, "", "endpoints", "disable", "crm-api", "--yes", "--reason", "maintenance").want(t, exitOK, "endpoint crm-api disabled")
	r = p.ctl(t, "", "replay", crm[0].id)
	r.want(t, exitRefused)
	if !strings.Contains(r.stderr, "endpoint-disabled") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	p.ctl(t, "", "-o", "wide", "endpoints", "list").want(t, exitOK, "crm-api", "admin ops: maintenance", "pay-api")
	p.ctl(t, "", "endpoints", "enable", "crm-api").want(t, exitOK, "endpoint crm-api enabled")
	p.ctl(t, "", "replay", crm[0].id).want(t, exitOK, "replayed "+crm[0].id)
	p.ctl(t, "", "endpoints", "reset", "pay-api").want(t, exitOK, "endpoint pay-api")

	p.ctl(t, "", "dead-letters", "discard", pay[1].id).want(t, exitOK, "discarded "+pay[1].id)
	p.ctl(t, "", "dead-letters", "get", pay[1].id).want(t, exitNotFound)
	p.idle(t, "pay-api")
	p.idle(t, "crm-api")
	if got := countKeys(p.up.received()); got["pay-0"] != 2 || got["crm-0"] != 2 || got["pay-1"] != 1 {
		t.Fatalf("upstream received %v; want pay-0 and crm-0 twice (original, replay), pay-1 once", got)
	}
}

// countKeys counts requests per Idempotency-Key (sf-string quotes dropped).
func countKeys(keys []string) map[string]int {
	out := map[string]int{}
	for _, k := range keys {
		out[strings.Trim(k, `"`)]++
	}
	return out
}

// TestFilteredWindowReplay: a replay of the window [T1, T2] of one
// endpoint sends exactly the matching dead letters, once each, each with
// its original key; --dry-run sends nothing and lists what would be sent.
func TestFilteredWindowReplay(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 8, time.Second)
	p.seedDeadLetters(t, "crm-api", "crm", 2, -4*time.Second) // inside the same window, another endpoint
	p.up.ok.Store(true)
	before := len(p.up.received())
	since, until := pay[2].at.UTC().Format(time.RFC3339Nano), pay[5].at.UTC().Format(time.RFC3339Nano)

	r := p.ctl(t, "", "replay", "--endpoint", "pay-api", "--since", since, "--until", until, "--dry-run")
	r.want(t, exitOK, "dry run: 4 of 4 dead letters would be replayed", "would_send")
	for i, d := range pay {
		if in := i >= 2 && i <= 5; strings.Contains(r.stdout, d.id) != in {
			t.Fatalf("dry run lists %s (pay-%d): %v, want %v\n%s", d.id, i, !in, in, r.stdout)
		}
	}
	if st, _ := p.store.EndpointState(t.Context(), "pay-api"); st.Due+st.Leased != 0 || len(p.up.received()) != before {
		t.Fatalf("the dry run sent something: backlog %d, upstream %d→%d", st.Due+st.Leased, before, len(p.up.received()))
	}

	r = p.ctl(t, "", "replay", "--endpoint", "pay-api", "--since", since, "--until", until, "--rate", "1000", "--yes")
	r.want(t, exitOK, "completed: 4 of 4 sent")
	if strings.Contains(r.stderr, "replaying") {
		t.Fatalf("a progress bar was drawn on a stderr that is not a terminal:\n%s", r.stderr)
	}
	p.idle(t, "pay-api")
	got := countKeys(p.up.received()[before:])
	want := map[string]int{"pay-2": 1, "pay-3": 1, "pay-4": 1, "pay-5": 1}
	if len(got) != len(want) || got["pay-2"] != 1 || got["pay-3"] != 1 || got["pay-4"] != 1 || got["pay-5"] != 1 {
		t.Fatalf("replays sent upstream %v, want %v", got, want)
	}
}

// TestBulkReplayConfirmation: without --yes a bulk replay says how many
// it would send and asks; declining sends nothing (exit 4).
func TestBulkReplayConfirmation(t *testing.T) {
	p := startProxy(t)
	crm := p.seedDeadLetters(t, "crm-api", "crm", 3, time.Second)
	p.up.ok.Store(true)
	before := len(p.up.received())
	r := p.ctl(t, "n\n", "replay", "--endpoint", "crm-api")
	r.want(t, exitRefused)
	if !strings.Contains(r.stderr, "Replay 3 dead letters (of crm-api") || !strings.Contains(r.stderr, "[y/N]") {
		t.Fatalf("no question:\n%s", r.stderr)
	}
	p.ctl(t, "", "replay", crm[0].id, crm[1].id).want(t, exitRefused) // end of input declines
	if n := len(p.up.received()); n != before {
		t.Fatalf("declined, yet %d requests were sent", n-before)
	}
	p.ctl(t, "yes\n", "replay", crm[0].id, crm[2].id, "--rate", "1000").want(t, exitOK, "completed: 2 of 2 sent")
	p.idle(t, "crm-api")
	if got := countKeys(p.up.received()[before:]); got["crm-0"] != 1 || got["crm-2"] != 1 || len(got) != 2 {
		t.Fatalf("sent %v", got)
	}
	jobs := p.ctl(t, "", "-o", "wide", "replay-jobs", "list")
	jobs.want(t, exitOK, "completed", "ops")
	if strings.Count(jobs.stdout, "\n") != 5 { // header, three dry runs (the counts), the replay
		t.Fatalf("jobs:\n%s", jobs.stdout)
	}
}

// TestReadTokenCannotReplayAndEveryReplayIsAudited: a read-scoped token
// lists but cannot replay (exit 4); every replay is in the audit log with
// the token's name.
func TestReadTokenCannotReplayAndEveryReplayIsAudited(t *testing.T) {
	p := startProxy(t)
	pay := p.seedDeadLetters(t, "pay-api", "pay", 3, time.Second)
	p.up.ok.Store(true)
	p.ctl(t, "", "--token", viewerToken, "dead-letters", "list").want(t, exitOK, pay[0].id)
	for _, args := range [][]string{
		{"replay", pay[0].id},
		{"replay", "--endpoint", "pay-api", "--yes"},
		{"dead-letters", "discard", pay[0].id},
	} {
		r := p.ctl(t, "", append([]string{"--token", viewerToken}, args...)...)
		r.want(t, exitRefused)
		if !strings.Contains(r.stderr, "403 forbidden") {
			t.Fatalf("%v: stderr %s", args, r.stderr)
		}
	}
	p.ctl(t, "", "replay", pay[0].id).want(t, exitOK)
	// pay-0 is skipped (already replayed): the end state asked for, exit 0.
	p.ctl(t, "", "replay", "--endpoint", "pay-api", "--rate", "1000", "--yes").want(t, exitOK, "2 of 3 sent", "1 skipped",
		"already_replayed 1")

	var replays []string
	denied := 0
	for _, a := range p.logs.Audits() {
		switch {
		case a["result"] == "forbidden":
			if a["token"] != "viewer" {
				t.Fatalf("refusal audited without the token's name: %v", a)
			}
			denied++
		case a["action"] == "replay":
			if a["token"] != "ops" {
				t.Fatalf("replay audited as %v", a)
			}
			replays = append(replays, a["dead_letter_id"].(string)+":"+a["result"].(string))
		}
	}
	slices.Sort(replays)
	want := []string{pay[0].id + ":already_replayed", pay[0].id + ":replayed", pay[1].id + ":replayed", pay[2].id + ":replayed"}
	slices.Sort(want)
	if denied != 3 || !slices.Equal(replays, want) {
		t.Fatalf("audit: %d refusals, replays %v\nwant 3 and %v", denied, replays, want)
	}
}

// TestUsageAndNotFoundExitCodes checks the documented exit codes of bad
// command lines and unknown ids.
func TestUsageAndNotFoundExitCodes(t *testing.T) {
	p := startProxy(t)
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no command", nil, exitOK},
		{"unknown command", []string{"frob"}, exitUsage},
		{"group without command", []string{"replay-jobs"}, exitUsage},
		{"replay without ids or filters", []string{"replay"}, exitUsage},
		{"ids and filters", []string{"replay", "x", "--endpoint", "pay-api"}, exitUsage},
		{"bad rate", []string{"replay", "--endpoint", "pay-api", "--rate", "fast"}, exitUsage},
		{"bad time", []string{"dead-letters", "list", "--since", "yesterday"}, exitUsage},
		{"bad output", []string{"-o", "xml", "dead-letters", "list"}, exitUsage},
		{"server refuses a filter", []string{"dead-letters", "list", "--status", "999"}, exitUsage},
		{"unknown dead letter", []string{"dead-letters", "get", "00AAAAAAAAAAAAAAAAAAAAAA"}, exitNotFound},
		{"unknown job", []string{"replay-jobs", "get", "AAAAAAAAAAAAAAAAAAAAAA"}, exitNotFound},
		{"unknown endpoint", []string{"endpoints", "enable", "nope-api"}, exitNotFound},
		{"bad token", []string{"--token", "wrong-token-0123456789", "dead-letters", "list"}, exitRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := p.ctl(t, "", tt.args...); r.code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tt.code, r.stdout, r.stderr)
			}
		})
	}
}
