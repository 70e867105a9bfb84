package salesforce

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// Transitions are the statuses the proxy itself sets — around a replay and
// when its copy expires — and the only ones it writes to Status__c (contract
// §8: Status__c belongs to the admin after the first write). New is the
// picklist's default: a record is created without Status__c and shows it.
// Reprocess Requested and Discarded are an admin's choices, never written.
var Transitions = []string{policy.RecordReprocessing, policy.RecordReprocessed, policy.RecordFailedAgain, policy.RecordExpired}

// ExternalIDField is Failed_Callout__c's external id: upserts key on it,
// so a retried write never makes two records (contract §7).
const ExternalIDField = "Callout_Id__c"

// sfTime formats a time as a Salesforce dateTime (ISO 8601, UTC, ms).
func sfTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// orNil is s, or nil (a JSON null clears the field) when s is empty.
func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// fieldLength returns the length of a Failed_Callout__c field in
// FailedCalloutFields.
func fieldLength(name string) int {
	for _, f := range FailedCalloutFields {
		if f.Name == name {
			return f.Length
		}
	}
	return LongTextMax
}

// text is s made valid UTF-8 and cut to the length of field, or nil when
// empty.
func text(field, s string) any {
	return orNil(cleanText(s, fieldLength(field)))
}

// FailedCallout builds the Failed_Callout__c record of root from the dead
// letter copy c (root itself, or a replay chain of it that dead-lettered
// again), every value redacted with rules (contract §7; nil rules hide the
// fixed headers only) and cut to its field (bodies and values longer than
// a Long Text Area are cut on a character boundary and flagged, a body that
// is not UTF-8 is stored base64 and flagged; the proxy's store keeps the
// whole payload for replay). status is the record's status, "" to leave
// Status__c out (a new record then shows the picklist default, New; an
// existing one keeps its value); replay its latest replay chain ("" none). retention is the dead-letter retention,
// for Expires_At__c. Fields the copy has no value for are sent as null so
// that the record shows this copy, not a mix.
func FailedCallout(root string, c *policy.Callout, status, replay string, rules *redact.Rules,
	retention time.Duration) sfapi.Record {
	r := sfapi.Record{
		ExternalIDField: root, "Replay_Callout_Id__c": orNil(replay),
		"Endpoint__c": text("Endpoint__c", c.Endpoint), "Method__c": text("Method__c", c.Method),
		"Idempotency_Key__c":  text("Idempotency_Key__c", c.IdempotencyKey),
		"Source_Record_Id__c": text("Source_Record_Id__c", c.SourceRecord),
		"Path__c":             text("Path__c", pathWithQuery(c, rules)),
		"Request_Headers__c":  text("Request_Headers__c", headerLines(rules.Header(c.Header))),
		"Last_Error__c":       text("Last_Error__c", rules.Text(c.LastError)),
		"Attempts__c":         c.Attempts, "Attempt_Log__c": text("Attempt_Log__c", attemptLog(c.AttemptLog)),
		"First_Attempt_At__c": sfTime(c.FirstAttemptAt), "Last_Attempt_At__c": nil,
		"Dead_Lettered_At__c": nil, "Expires_At__c": nil, "Reason__c": orNil(string(c.DeadLetterReason)),
		"Last_Status_Code__c": nil,
	}
	if status != "" {
		r["Status__c"] = status
	}
	if n := len(c.AttemptLog); n > 0 {
		r["Last_Attempt_At__c"] = sfTime(c.AttemptLog[n-1].StartedAt)
	}
	if c.State == policy.DeadLettered && !c.FinishedAt.IsZero() {
		r["Dead_Lettered_At__c"] = sfTime(c.FinishedAt)
		r["Expires_At__c"] = sfTime(c.FinishedAt.Add(retention))
	}
	req := bodyField(rules, c.Header.Get("Content-Type"), c.Body, false)
	r["Request_Body__c"], r["Request_Body_Truncated__c"], r["Request_Body_Base64__c"] =
		orNil(req.Text), req.Truncated, req.Base64
	var resp Body
	if c.Response != nil {
		r["Last_Status_Code__c"] = c.Response.Status
		resp = bodyField(rules, c.Response.Header.Get("Content-Type"), c.Response.Body, c.Response.Truncated)
	}
	r["Last_Response_Body__c"], r["Last_Response_Body_Truncated__c"], r["Last_Response_Body_Base64__c"] =
		orNil(resp.Text), resp.Truncated, resp.Base64
	return r
}

// StatusOnly is the partial Failed_Callout__c write of a status change:
// the external id, the status (when not "") and the latest replay chain
// (when known).
func StatusOnly(root, status, replay string) sfapi.Record {
	r := sfapi.Record{ExternalIDField: root}
	if status != "" {
		r["Status__c"] = status
	}
	if replay != "" {
		r["Replay_Callout_Id__c"] = replay
	}
	return r
}

// bodyField redacts a body (JSON fields, form parameters) and prepares it
// for a Long Text Area; capped says the stored body was already cut.
func bodyField(rules *redact.Rules, contentType string, b []byte, capped bool) Body {
	red, _ := rules.JSONBody(contentType, b)
	out := TextBody(red, LongTextMax)
	out.Truncated = out.Truncated || capped
	return out
}

// pathWithQuery is the request's path and redacted query.
func pathWithQuery(c *policy.Callout, rules *redact.Rules) string {
	if c.Query == "" {
		return c.Path
	}
	return c.Path + "?" + rules.Query(c.Query)
}

// headerLines writes a header as "Name: value" lines, names sorted, one
// line per value.
func headerLines(h http.Header) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			b.WriteString(name + ": " + v + "\n")
		}
	}
	return b.String()
}

// attemptLog writes the attempt log one line per attempt:
// "#n kind started_at status outcome duration error".
func attemptLog(log []policy.Attempt) string {
	var b strings.Builder
	for _, a := range log {
		status := "-"
		if a.Status != 0 {
			status = fmt.Sprint(a.Status)
		}
		fmt.Fprintf(&b, "#%d %s %s %s %s %dms", a.N, a.Kind, a.StartedAt.UTC().Format(time.RFC3339Nano),
			status, a.Outcome, a.Duration.Milliseconds())
		if a.Error != "" {
			b.WriteString(" " + a.Error)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ResultEvent builds the Callout_Result__e of callout c, which ended
// (contract §8): its id, endpoint, source record, state, last status code and
// at most ResultBodyMax characters of its redacted final body. A body that
// is not UTF-8 is left out (Body_Truncated__c true): the caller can read it
// with GET /v1/callouts/{id}.
func ResultEvent(c *policy.Callout, rules *redact.Rules) sfapi.Record {
	r := sfapi.Record{"Callout_Id__c": c.ID, "Endpoint__c": cleanText(c.Endpoint, 63),
		"State__c": string(c.State), "Body_Truncated__c": false}
	if c.SourceRecord != "" {
		r["Source_Record_Id__c"] = cleanText(c.SourceRecord, 18)
	}
	if c.Response == nil {
		return r
	}
	r["Status_Code__c"] = c.Response.Status
	body, _ := rules.JSONBody(c.Response.Header.Get("Content-Type"), c.Response.Body)
	if !utf8.Valid(body) {
		r["Body_Truncated__c"] = len(body) > 0
		return r
	}
	t, cut := CutText(string(body), ResultBodyMax)
	if t != "" {
		r["Body__c"] = t
	}
	r["Body_Truncated__c"] = cut || c.Response.Truncated
	return r
}
