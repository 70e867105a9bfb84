package console

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// TestTemplatesHaveNoInlineCode keeps the pages within the CSP: no inline
// script, style element, style attribute or event handler attribute.
func TestTemplatesHaveNoInlineCode(t *testing.T) {
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|<style|\sstyle=|\son[a-z]+=|javascript:`)
	n := 0
	err := fs.WalkDir(templateFS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(templateFS, path)
		if err != nil {
			return err
		}
		n++
		if m := inline.Find(b); m != nil {
			t.Errorf("%s: inline code %q", path, m)
		}
		return nil
	})
	if err != nil || n < 10 {
		t.Fatalf("walked %d templates: %v", n, err)
	}
	p := mustParsePages()
	for _, name := range []string{"login", "error", "endpoints", "endpoint_confirm", "deadletters", "callout",
		"replay_new", "replayjobs", "replayjob", "callouts", "endpoint", "bulk"} {
		if p.byName[name] == nil {
			t.Errorf("no page %s", name)
		}
	}
}

// TestLocalNext: a console path is kept as the page to go to after the
// login; anything else (none, the console root, the login page itself,
// another origin, a backslash, a header injection, a path outside the
// console) falls back to the endpoints page.
func TestLocalNext(t *testing.T) {
	for _, next := range []string{"/console/dead-letters?endpoint=a", "/console/replay-jobs/x"} {
		if got := localNext(next); got != next {
			t.Errorf("localNext(%q) = %q, want it kept", next, got)
		}
	}
	for _, next := range []string{"", "/console", "/console/login?next=x", "https://evil.example/console/",
		"//evil.example/console/", "/console/\\evil", "/console/x\r\nSet-Cookie: a=b", "/admin/v1/endpoints"} {
		if got := localNext(next); got != "/console/endpoints" {
			t.Errorf("localNext(%q) = %q, want %q", next, got, "/console/endpoints")
		}
	}
}

func TestFuncs(t *testing.T) {
	now := time.Date(2025, 1, 31, 14, 0, 0, 0, time.UTC)
	later := now.Add(4*time.Minute + 10*time.Second)
	for _, tt := range []struct {
		got, want string
	}{
		{relative(now, later), "in 4m10s"},
		{relative(now, &later), "in 4m10s"},
		{relative(now, now.Add(-3*time.Hour-2*time.Minute)), "3h2m ago"},
		{relative(now, now.Add(-50*time.Hour)), "2d2h ago"},
		{relative(now, now), "now"},
		{relative(now, (*time.Time)(nil)), ""},
		{timestamp(later), "2025-01-31 14:04:10 UTC"},
		{byteSize(512), "512 B"},
		{byteSize(1536), "1.5 KiB"},
		{byteSize(12 << 20), "12.0 MiB"},
		{millis(840), "840 ms"},
		{millis(2300), "2.3 s"},
		{gateClass(policy.GateOpen), "ok"},
		{gateClass(policy.GateProbing), "warn"},
		{gateClass(policy.GateBreakerOpen), "bad"},
		{salesforceLink("https://org.my.salesforce.com", "001000000000001AAA"), "https://org.my.salesforce.com/001000000000001AAA"},
		{salesforceLink("https://org.my.salesforce.com", "001000000000001"), "https://org.my.salesforce.com/001000000000001"},
		{salesforceLink("javascript:alert(1)//", "001000000000001AAA"), ""},
		{salesforceLink("http://org.my.salesforce.com", "001000000000001AAA"), ""},
		{salesforceLink("https://org.my.salesforce.com", "../../x"), ""},
		{bodyText(`{"a":1}`).Text, "{\n  \"a\": 1\n}"},
		{bodyText("<script>alert(1)</script>").Text, "<script>alert(1)</script>"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	big := bodyText(strings.Repeat("é", maxBodyShown))
	if !big.Cut || len(big.Text) > maxBodyShown || !strings.HasSuffix(big.Text, "é") {
		t.Errorf("a long body is cut at %d bytes on a character boundary: cut %v, %d bytes", maxBodyShown, big.Cut, len(big.Text))
	}
	if percent(3, 3) != 100 || percent(1, 3) != 33 || percent(0, 0) != 100 {
		t.Error("percent")
	}
}

func TestJobView(t *testing.T) {
	start := time.Date(2025, 1, 31, 14, 0, 0, 0, time.UTC)
	j := jobViewOf(apiJob(start, 10, 40), start.Add(5*time.Second))
	if j.Percent != 25 || j.Observed != 2 || j.ETA != "15s" {
		t.Fatalf("%+v: want 25 %%, 2/s, 15s left", j)
	}
	if j := jobViewOf(apiJob(start, 0, 40), start.Add(5*time.Second)); j.Observed != 0 || j.ETA != "" {
		t.Fatalf("%+v: nothing done, no rate or ETA", j)
	}
}

// apiJob is a running job in its send phase, done of total since start.
func apiJob(start time.Time, done, total int) api.ReplayJob {
	return api.ReplayJob{State: policy.JobRunning, Phase: policy.PhaseSend, StartedAt: &start,
		Done: done, Sent: done, Total: total}
}
