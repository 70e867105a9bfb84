package statusdoc

import (
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

func TestOutcome(t *testing.T) {
	want := map[policy.State]policy.Outcome{
		policy.Scheduled: policy.Retryable, policy.InFlight: policy.Retryable, policy.Held: policy.Retryable,
		policy.Succeeded: policy.Success, policy.Failed: policy.Permanent, policy.DeadLettered: policy.Permanent,
	}
	for st, out := range want {
		if got := Outcome(st); got != out {
			t.Errorf("Outcome(%s) = %s, want %s", st, got, out)
		}
	}
}

func TestBody(t *testing.T) {
	if b, enc := Body([]byte(`{"a":"é"}`)); b != `{"a":"é"}` || enc != "" {
		t.Errorf("Body(utf-8) = %q, %q", b, enc)
	}
	if b, enc := Body([]byte{0xff, 0x00}); b != "/wA=" || enc != "base64" {
		t.Errorf("Body(binary) = %q, %q", b, enc)
	}
}

// TestRender: the query, errors, response headers and JSON body are
// redacted by the endpoint's rules; the response and next attempt show by
// state; an endpoint no longer configured gets the default rules.
func TestRender(t *testing.T) {
	cfg := &config.Config{Endpoints: map[string]*config.Endpoint{"pay-api": {Name: "pay-api",
		Redact: config.Redact{Query: []string{"api_key"}, JSONFields: []string{"card"}}}}}
	rs := NewRedactions(cfg)
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	c := &policy.Callout{ID: "id", Endpoint: "pay-api", Method: "POST", Path: "/v1", Query: "api_key=k&x=1",
		State: policy.Succeeded, NextAttemptAt: at, LastError: "Bearer abc",
		AttemptLog: []policy.Attempt{{N: 1, Kind: policy.KindFirst, StartedAt: at, Duration: 1500 * time.Millisecond,
			Status: 200, Outcome: policy.Success}},
		Response: &policy.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"},
			"Set-Cookie": {"s=1"}}, Body: []byte(`{"card":"4111"}`)}}
	d := Render(c, rs.For("pay-api"))
	if d.Path != "/v1?api_key="+redact.Mask+"&x=1" || d.Outcome != policy.Success || d.NextAttemptAt != nil ||
		d.Response == nil || d.Response.Headers.Get("Set-Cookie") != redact.Mask ||
		d.Response.Body != `{"card":"`+redact.Mask+`"}` || d.Attempts[0].DurationMs != 1500 ||
		d.Attempts[0].Kind != "first" || d.Attempts[0].StartedAt.Location() != time.UTC {
		t.Fatalf("document = %+v / %+v", d, d.Response)
	}
	c.State = policy.Scheduled
	d = Render(c, rs.For("gone-api"))
	if d.Response != nil || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(at) || d.Outcome != policy.Retryable ||
		d.Path != "/v1?api_key=k&x=1" {
		t.Fatalf("scheduled document under the default rules = %+v", d)
	}
}
