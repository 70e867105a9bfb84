package statusdoc

import (
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

// TestOutcome: a pending callout is retryable; a finished one reports its
// last attempt's class, so a dead letter of 503s is retryable, not
// permanent (contract §12); one that never had an attempt is rejected.
func TestOutcome(t *testing.T) {
	att := func(o policy.Outcome) []policy.Attempt { return []policy.Attempt{{N: 1, Outcome: o}} }
	for _, tt := range []struct {
		name        string
		c           policy.Callout
		want, wantL policy.Outcome
	}{
		{"scheduled", policy.Callout{State: policy.Scheduled, AttemptLog: att(policy.Retryable)}, policy.Retryable, policy.Retryable},
		{"held before any attempt", policy.Callout{State: policy.Held}, policy.Retryable, ""},
		{"in flight", policy.Callout{State: policy.InFlight}, policy.Retryable, ""},
		{"succeeded", policy.Callout{State: policy.Succeeded, AttemptLog: att(policy.Success)}, policy.Success, policy.Success},
		{"failed", policy.Callout{State: policy.Failed, AttemptLog: att(policy.Permanent)}, policy.Permanent, policy.Permanent},
		{"exhausted after 503s", policy.Callout{State: policy.DeadLettered, DeadLetterReason: policy.DeadLetterExhausted,
			AttemptLog: att(policy.Retryable)}, policy.Retryable, policy.Retryable},
		{"dead letter of a 4xx", policy.Callout{State: policy.DeadLettered, DeadLetterReason: policy.DeadLetterPermanent,
			AttemptLog: att(policy.Permanent)}, policy.Permanent, policy.Permanent},
		{"disabled before its first attempt", policy.Callout{State: policy.DeadLettered,
			DeadLetterReason: policy.DeadLetterEndpointDisabled}, policy.Rejected, ""},
	} {
		if got, last := Outcome(&tt.c), LastOutcome(&tt.c); got != tt.want || last != tt.wantL {
			t.Errorf("%s: Outcome, LastOutcome = %q, %q; want %q, %q", tt.name, got, last, tt.want, tt.wantL)
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

// TestRenderSigning: a standard_webhooks endpoint's documents show the
// webhook-id of the callout and, for a replay, of the dead letter it
// replays; the signing headers of both kinds are redacted wherever a
// request or response header is shown; other endpoints show no webhook-id.
func TestRenderSigning(t *testing.T) {
	cfg := &config.Config{Endpoints: map[string]*config.Endpoint{
		"hooks": {Name: "hooks", StandardWebhooks: &config.StandardWebhooks{Secrets: []config.SecretRef{{Env: "S"}}}},
		"aws":   {Name: "aws", AWSSigV4: &config.AWSSigV4{Region: "eu-west-1", Service: "execute-api"}},
	}}
	rs := NewRedactions(cfg)
	c := &policy.Callout{ID: "0aNEW", Endpoint: "hooks", Method: "POST", Path: "/v1", State: policy.Scheduled, ReplayOf: "0aOLD"}
	d := Render(c, rs.For("hooks"))
	if d.WebhookID != "msg_0aNEW" || d.ReplayOfWebhookID != "msg_0aOLD" || d.ReplayOf != "0aOLD" {
		t.Errorf("webhook ids = %q, %q (replay_of %q)", d.WebhookID, d.ReplayOfWebhookID, d.ReplayOf)
	}
	if d := Render(c, rs.For("aws")); d.WebhookID != "" || d.ReplayOfWebhookID != "" {
		t.Errorf("an endpoint without standard_webhooks shows webhook id %q", d.WebhookID)
	}
	h := http.Header{"Webhook-Signature": {"v1,c2ln"}, "Webhook-Id": {"msg_1"}, "Authorization": {"AWS4-HMAC-SHA256 x"},
		"X-Amz-Security-Token": {"tok"}, "X-Amz-Date": {"20260302T090000Z"}, "Content-Type": {"application/json"}}
	for _, ep := range []string{"hooks", "aws"} {
		got := rs.For(ep).Header(h)
		if got.Get("Authorization") != redact.Mask || got.Get("Content-Type") != "application/json" {
			t.Errorf("%s: redacted header = %v", ep, got)
		}
	}
	if got := rs.For("hooks").Header(h); got.Get("Webhook-Signature") != redact.Mask {
		t.Errorf("hooks: webhook-signature = %q", got.Get("Webhook-Signature"))
	}
	if got := rs.For("aws").Header(h); got.Get("X-Amz-Security-Token") != redact.Mask {
		t.Errorf("aws: X-Amz-Security-Token = %q", got.Get("X-Amz-Security-Token"))
	}
}
