package tracing_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/srctest"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// reasonWords returns the classification reason words the binary sends:
// the string constants Reason* of policy/reasons.go, read from the source
// so that a word added there is known here too.
func reasonWords(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, c := range srctest.StringConsts(t, "../../policy/reasons.go") {
		if strings.HasPrefix(c.Name, "Reason") {
			out = append(out, c.Value)
		}
	}
	if !slices.Contains(out, policy.ReasonStatus5xx) {
		t.Fatalf("read %v from policy/reasons.go, which lacks %q", out, policy.ReasonStatus5xx)
	}
	return out
}

// documented returns the values docs/tracing.md gives for attribute key
// in its span table: the backticked words of the parenthesis after
// `key`, after its last colon when it has one ("(after the completion:
// `scheduled`, …)"), one list per occurrence.
func documented(t *testing.T, doc, key string) [][]string {
	t.Helper()
	re := regexp.MustCompile("`" + regexp.QuoteMeta(key) + "` \\(([^)]*)\\)")
	word := regexp.MustCompile("`([^`]+)`")
	var out [][]string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		text := m[1]
		if i := strings.LastIndex(text, ": "); i >= 0 {
			text = text[i+2:]
		}
		var vals []string
		for _, w := range word.FindAllStringSubmatch(text, -1) {
			vals = append(vals, w[1])
		}
		out = append(out, vals)
	}
	if len(out) == 0 {
		t.Errorf("docs/tracing.md gives no values for %s", key)
	}
	return out
}

// TestDocsAttributeValues: the attribute values docs/tracing.md lists are
// the ones the binary sends — every value of the closed sets (admission
// results, attempt kinds and modes, outcomes, actions) and only those;
// reason words and states that exist; and every key of tracing.Keys is
// documented.
func TestDocsAttributeValues(t *testing.T) {
	b, err := os.ReadFile("../../docs/tracing.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	strs := func(vs ...any) []string {
		var out []string
		for _, v := range vs {
			switch v := v.(type) {
			case tracing.AdmissionResult:
				out = append(out, string(v))
			case policy.Kind:
				out = append(out, string(v))
			case policy.Outcome:
				out = append(out, string(v))
			case policy.Action:
				out = append(out, string(v))
			case policy.State:
				out = append(out, string(v))
			case string:
				out = append(out, v)
			}
		}
		slices.Sort(out)
		return out
	}
	closed := map[string][]string{
		"callout.admission": strs(tracing.AdmitAttempt, tracing.AdmitScheduled, tracing.AdmitHeld,
			tracing.AdmitDuplicate, tracing.AdmitRejected),
		"callout.attempt.kind": strs(policy.KindFirst, policy.KindRetry, policy.KindProbe, policy.KindReplay),
		"callout.attempt.mode": strs(tracing.ModeSynchronous, tracing.ModeInline, tracing.ModeDispatched),
		"callout.outcome":      strs(policy.Success, policy.Retryable, policy.Permanent, policy.Rejected),
		"callout.action": strs(policy.ActionSucceed, policy.ActionFail, policy.ActionRetry,
			policy.ActionRetryInline, policy.ActionDeadLetter),
	}
	for key, want := range closed {
		for _, got := range documented(t, doc, key) {
			if slices.Sort(got); !slices.Equal(got, want) {
				t.Errorf("docs/tracing.md gives %s %v; the code sends %v", key, got, want)
			}
		}
	}
	open := map[string][]string{
		"callout.reason": reasonWords(t),
		"callout.state": strs(policy.Scheduled, policy.InFlight, policy.Held, policy.Succeeded, policy.Failed,
			policy.DeadLettered),
	}
	for key, known := range open {
		for _, got := range documented(t, doc, key) {
			for _, v := range got {
				if !slices.Contains(known, v) {
					t.Errorf("docs/tracing.md gives %s %q, which the code never sends (it sends %v)", key, v, known)
				}
			}
		}
	}
	for _, k := range tracing.Keys {
		name := string(k)
		short := ""
		if rest, ok := strings.CutPrefix(name, "salesforce.entries"); ok {
			short = "`" + rest + "`" // written `_retried` after salesforce.entries_done
		}
		if !strings.Contains(doc, "`"+name+"`") && (short == "" || !strings.Contains(doc, short)) {
			t.Errorf("attribute key %s is not in docs/tracing.md", name)
		}
	}
}
