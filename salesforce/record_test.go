package salesforce

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

func TestStatusConstantsArePicklist(t *testing.T) {
	consts := []string{policy.RecordNew, policy.RecordReprocessRequested, policy.RecordReprocessing, policy.RecordReprocessed,
		policy.RecordFailedAgain, policy.RecordDiscarded, policy.RecordExpired}
	if !slices.Equal(consts, policy.RecordStatuses) {
		t.Errorf("status constants %q, Statuses %q", consts, policy.RecordStatuses)
	}
	for _, s := range []string{policy.RecordReprocessed, policy.RecordDiscarded, policy.RecordExpired} {
		if !slices.Contains(policy.RecordStatuses, s) {
			t.Errorf("redisstore's %q is not a status", s)
		}
	}
}

// deadLetterCopy is a stored dead letter with every part set.
func deadLetterCopy(body, respBody []byte) *policy.Callout {
	return &policy.Callout{
		ID: "c1", Endpoint: "payments", Method: "POST", Path: "/v1/charges", Query: "api_key=k&a=1",
		Header:         http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {"injected-looking"}},
		Body:           body,
		IdempotencyKey: strings.Repeat("k", 300), SourceRecord: "a01000000000001AAA",
		State: policy.DeadLettered, Attempts: 2, FirstAttemptAt: t0, FinishedAt: t0.Add(time.Minute),
		AttemptLog: []policy.Attempt{
			{N: 1, Kind: policy.KindFirst, StartedAt: t0, Duration: time.Second, Outcome: policy.Retryable, Error: "connect_timeout"},
			{N: 2, Kind: policy.KindRetry, StartedAt: t0.Add(time.Minute), Duration: 2 * time.Second, Status: 400, Outcome: policy.Permanent},
		},
		Response:         &policy.Response{Status: 400, Header: http.Header{"Content-Type": {"text/plain"}}, Body: respBody, Truncated: true},
		LastError:        "got 401 for Bearer eyJhbGci.x.y",
		DeadLetterReason: policy.DeadLetterPermanent,
	}
}

// TestFailedCalloutFields: every field written is in the one mapping
// (FailedCalloutFields, checked against apex-stubs/), within its length,
// redacted, with the text rules of contract §7.
func TestFailedCalloutFields(t *testing.T) {
	rules := redact.New(config.Redact{Query: []string{"api_key"}}, []string{"X-Api-Key"})
	big := []byte(strings.Repeat("é", LongTextMax)) // 2 bytes, 1 character each: fits exactly
	binary := append([]byte{0xff, 0xfe}, make([]byte, LongTextMax)...)
	r := FailedCallout("root1", deadLetterCopy(append(big, 'x'), binary), policy.RecordFailedAgain, "c1", rules, 30*day)
	declared := map[string]Field{}
	for _, f := range FailedCalloutFields {
		declared[f.Name] = f
	}
	for name, v := range r {
		f, ok := declared[name]
		if !ok {
			t.Errorf("%s is not in FailedCalloutFields", name)
			continue
		}
		if s, ok := v.(string); ok && f.Length > 0 && len(utf16.Encode([]rune(s))) > f.Length {
			t.Errorf("%s: %d characters, field holds %d", name, len(utf16.Encode([]rune(s))), f.Length)
		}
	}
	for _, c := range []struct {
		field string
		want  any
	}{
		{ExternalIDField, "root1"}, {"Status__c", policy.RecordFailedAgain}, {"Replay_Callout_Id__c", "c1"},
		{"Path__c", "/v1/charges?api_key=[REDACTED]&a=1"}, {"Request_Headers__c", "Content-Type: application/json\nX-Api-Key: [REDACTED]\n"},
		{"Last_Error__c", "got 401 for Bearer [REDACTED]"}, {"Request_Body_Truncated__c", true},
		{"Request_Body_Base64__c", false}, {"Last_Response_Body_Base64__c", true},
		{"Last_Response_Body_Truncated__c", true}, {"Attempts__c", 2}, {"Last_Status_Code__c", 400},
		{"Reason__c", "permanent"}, {"Expires_At__c", "2023-12-14T22:14:20.000Z"},
		{"Last_Attempt_At__c", "2023-11-14T22:14:20.000Z"}, {"Idempotency_Key__c", strings.Repeat("k", 255)},
	} {
		if got := r[c.field]; got != c.want {
			t.Errorf("%s = %#v, want %#v", c.field, got, c.want)
		}
	}
	if got := r["Request_Body__c"].(string); got != string(big) {
		t.Errorf("request body cut to %d bytes, want the %d characters that fit", len(got), LongTextMax)
	}
	resp := r["Last_Response_Body__c"].(string)
	if len(resp)%4 != 0 || len(resp) > LongTextMax {
		t.Errorf("base64 body of %d characters", len(resp))
	}
	if dec, err := base64.StdEncoding.DecodeString(resp); err != nil || !slices.Equal(dec, binary[:len(dec)]) {
		t.Errorf("base64 body does not decode to the body's start: %v", err)
	}
	log := r["Attempt_Log__c"].(string)
	want := "#1 first 2023-11-14T22:13:20Z - retryable 1000ms connect_timeout\n#2 retry 2023-11-14T22:14:20Z 400 permanent 2000ms\n"
	if log != want {
		t.Errorf("attempt log = %q, want %q", log, want)
	}
}

func TestResultEvent(t *testing.T) {
	c := deadLetterCopy(nil, []byte(strings.Repeat("a", ResultBodyMax+1)))
	r := ResultEvent(c, nil)
	if r["Body_Truncated__c"] != true || len(r["Body__c"].(string)) != ResultBodyMax || r["State__c"] != "dead_lettered" {
		t.Errorf("event = %v", r)
	}
	c.Response = &policy.Response{Status: 200, Body: []byte{0xff}}
	if r := ResultEvent(c, nil); r["Body__c"] != nil || r["Body_Truncated__c"] != true {
		t.Errorf("binary body: %v", r)
	}
	c.Response = nil
	if r := ResultEvent(c, nil); r["Status_Code__c"] != nil || r["Body_Truncated__c"] != false {
		t.Errorf("no response: %v", r)
	}
}

func TestCutText(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false}, {"abcd", 3, "abc", true}, {"ééé", 2, "éé", true},
		{"a😀b", 2, "a", true}, // the emoji is two UTF-16 units: it does not fit after "a"
		{"a😀b", 3, "a😀", true}, {"😀", 1, "", true}, {"", 0, "", false}, {"x", 0, "", true},
	} {
		got, cut := CutText(c.in, c.max)
		if got != c.want || cut != c.cut {
			t.Errorf("CutText(%q, %d) = %q %v, want %q %v", c.in, c.max, got, cut, c.want, c.cut)
		}
	}
}

func TestTextBody(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []byte
		max  int
		want Body
	}{
		{"utf-8", []byte("héllo"), 10, Body{Text: "héllo"}},
		{"utf-8 cut", []byte("héllo"), 2, Body{Text: "hé", Truncated: true}},
		{"binary", []byte{0xff, 0x00}, 10, Body{Text: "/wA=", Base64: true}},
		{"binary cut to whole quanta", []byte{0xff, 0x00, 0x01, 0x02}, 7, Body{Text: "/wABAg"[:4], Truncated: true, Base64: true}},
		{"empty", nil, 10, Body{}},
		{"no room", []byte("x"), 0, Body{Truncated: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := TextBody(c.in, c.max); got != c.want {
				t.Errorf("TextBody = %+v, want %+v", got, c.want)
			}
		})
	}
}
