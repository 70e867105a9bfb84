package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// funcs are the templates' functions. Each returns text that html/template
// escapes for the context it lands in; none returns template.HTML.
func funcs() template.FuncMap {
	return template.FuncMap{
		"ts":          timestamp,
		"rel":         relative,
		"bytes":       byteSize,
		"ms":          millis,
		"gateClass":   gateClass,
		"pct":         percent,
		"sfLink":      salesforceLink,
		"bodyText":    bodyText,
		"join":        strings.Join,
		"list":        func(v ...string) []string { return v },
		"outcomeName": outcomeName,
		"lastAttempt": lastAttempt,
		"plural":      plural,
	}
}

// plural is one when n (an int or int64) is 1, else many: a count's
// words agree with it ("1 dead letter matches", "2 dead letters match").
func plural(n any, one, many string) string {
	switch v := n.(type) {
	case int:
		if v == 1 {
			return one
		}
	case int64:
		if v == 1 {
			return one
		}
	}
	return many
}

// when is a time or a pointer to one (the wire's optional times).
func when(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t != nil && !t.IsZero() {
			return *t, true
		}
	}
	return time.Time{}, false
}

// timestamp renders a time as "2006-01-02 15:04:05 UTC", "" when unset.
func timestamp(v any) string {
	t, ok := when(v)
	if !ok {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// relative renders a time against now: "in 4m10s", "3m5s ago", "now";
// "" when unset. Seconds are whole; hours and days are shown as such.
func relative(now time.Time, v any) string {
	t, ok := when(v)
	if !ok {
		return ""
	}
	d := t.Sub(now).Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d > 0:
		return "in " + span(d)
	}
	return span(-d) + " ago"
}

// span renders a positive duration shortly: 45s, 4m10s, 3h2m, 2d5h.
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// byteSize renders a byte count: 512 B, 1.5 KiB, 12.0 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// millis renders a whole-millisecond duration: 840 ms, 2.3 s.
func millis(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

// gateClass is the style class of a gate's badge. The badge shows the
// gate's own word (contract §12: open, half_open, probing, breaker_open,
// paused, disabled), never the breaker's.
func gateClass(g policy.GateState) string {
	switch g {
	case policy.GateOpen:
		return "ok"
	case policy.GateHalfOpen, policy.GateProbing, policy.GatePaused:
		return "warn"
	}
	return "bad"
}

// percent is done of total in whole per cent (100 when total is 0).
func percent(done, total int) int {
	if total <= 0 {
		return 100
	}
	return min(100, done*100/total)
}

// salesforceID is a Salesforce record id: 15 or 18 alphanumerics.
var salesforceID = regexp.MustCompile(`^[a-zA-Z0-9]{15}(?:[a-zA-Z0-9]{3})?$`)

// salesforceLink is the record page of a callout's source record
// (Callout-Source-Record) in its organisation: the issuer is the org's
// https URL (its My Domain), and https://<my domain>/<record id> opens the
// record. "" unless both look right.
func salesforceLink(issuer, record string) string {
	if !salesforceID.MatchString(record) {
		return ""
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return ""
	}
	return (&url.URL{Scheme: "https", Host: u.Host, Path: "/" + record}).String()
}

// maxBodyShown bounds the bytes of one body a page shows.
const maxBodyShown = 64 << 10

// shownBody is a body as a page shows it: indented when it is JSON, cut
// at maxBodyShown on a character boundary.
type shownBody struct {
	Text string
	Cut  bool
}

// bodyText prepares a (redacted) body for a <pre>: JSON indented, at
// most maxBodyShown bytes. html/template escapes the text.
func bodyText(s string) shownBody {
	var buf bytes.Buffer
	if json.Valid([]byte(s)) && json.Indent(&buf, []byte(s), "", "  ") == nil {
		s = buf.String()
	}
	if len(s) <= maxBodyShown {
		return shownBody{Text: s}
	}
	cut := maxBodyShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return shownBody{Text: s[:cut], Cut: true}
}

// lastAttempt is the last of a callout's attempts, nil when it has none:
// a dead letter's page names its reason and, apart from it, its last
// attempt's class (contract §12: a dead letter of 503s is exhausted, its
// last attempt retryable, never "permanent").
func lastAttempt(as []api.AttemptDoc) *api.AttemptDoc {
	if len(as) == 0 {
		return nil
	}
	return &as[len(as)-1]
}

// outcomeName is the text of a replay-outcome filter choice.
func outcomeName(key string) string {
	switch key {
	case "":
		return "any"
	case "none":
		return "not replayed (awaiting action)"
	case "pending":
		return "replayed: pending"
	case "succeeded":
		return "replayed: succeeded"
	case "failed_again":
		return "replayed: failed again"
	}
	return key
}
