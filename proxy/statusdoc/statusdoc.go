// Package statusdoc renders a callout record (policy.Callout) as the
// status document of contract §4 (api.StatusDocument), with its endpoint's
// secrets redacted (contract §7). Both listeners use it: the callout listener
// (proxy) for GET /v1/callouts/{id}, every 202 and a replayed answer
// without a stored response; the admin listener (proxy/admin) inside its
// callout documents.
package statusdoc

import (
	"context"
	"encoding/base64"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Redactions are the redaction rules of every configured endpoint: its
// redact section plus the names of the headers the proxy injects upstream
// and those its signing credentials set (contract §7). The zero value
// redacts every endpoint by the defaults only. Safe for concurrent use once
// made.
type Redactions struct {
	rules map[string]*Rules // endpoint -> its rules
}

// Rules are one endpoint's redaction rules, and what its status documents
// show of its credentials.
type Rules struct {
	*redact.Rules
	// Webhooks is set when the endpoint signs with standard_webhooks: its
	// documents show the webhook-id every attempt carries.
	Webhooks bool
}

// NewRedactions builds the rules of cfg's endpoints.
func NewRedactions(cfg *config.Config) Redactions {
	rules := map[string]*Rules{}
	for _, name := range cfg.EndpointNames() {
		ep, _ := cfg.Endpoint(name)
		hidden := append(slices.Collect(maps.Keys(ep.Headers)), ep.SigningHeaders()...)
		rules[name] = &Rules{Rules: redact.New(ep.Redact, hidden), Webhooks: ep.StandardWebhooks != nil}
	}
	return Redactions{rules: rules}
}

// For is the redaction of endpoint name; the defaults (Authorization,
// Cookie, Set-Cookie, Proxy-Authorization) when it is no longer configured.
func (r Redactions) For(name string) *Rules {
	if rules, ok := r.rules[name]; ok {
		return rules
	}
	return &Rules{Rules: redact.New(config.Redact{}, nil)}
}

// Outcome is the class of c's latest result (contract §12 "a class of a
// callout"): retryable while c is pending (scheduled, in_flight, held: as
// its 202 said), and once c finished its last attempt's class — success,
// permanent for a failed callout, and for a dead letter whatever its last
// attempt was (retryable after 503s or no answer: a dead letter's reason is
// not a class). A finished callout that never had an attempt (an endpoint
// disabled before it) is rejected: nothing was dispatched (contract §2).
func Outcome(c *policy.Callout) policy.Outcome {
	if !c.State.Finished() {
		return policy.Retryable
	}
	if last := LastOutcome(c); last != "" {
		return last
	}
	switch c.State {
	case policy.Succeeded:
		return policy.Success
	case policy.Failed:
		return policy.Permanent
	}
	return policy.Rejected
}

// LastOutcome is the class of c's last attempt; "" when it had none
// (contract §12).
func LastOutcome(c *policy.Callout) policy.Outcome {
	if n := len(c.AttemptLog); n > 0 {
		return c.AttemptLog[n-1].Outcome
	}
	return ""
}

// Body is b as a document carries a body: the text itself when it is valid
// UTF-8 (encoding ""), else standard base64 with encoding "base64".
func Body(b []byte) (body, encoding string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// Render is the status document of c, redacted by rules: the query of its
// path, its last error and each attempt's error, and the headers and JSON
// body of the final response, which is shown only once c finished. On a
// standard_webhooks endpoint it shows the webhook-id of c's attempts
// (credentials.WebhookID) and, for a replay, the one of the dead letter it
// replays.
func Render(c *policy.Callout, rules *Rules) api.StatusDocument {
	d := api.StatusDocument{
		ID: c.ID, Endpoint: c.Endpoint, Method: c.Method, Path: c.Path, IdempotencyKey: c.IdempotencyKey,
		SourceRecord: c.SourceRecord, State: c.State, Outcome: Outcome(c), LastOutcome: LastOutcome(c), ReplayOf: c.ReplayOf,
		DeadLetterReason: string(c.DeadLetterReason), LastError: rules.Text(c.LastError),
		Attempts: make([]api.AttemptDoc, 0, len(c.AttemptLog)),
	}
	if c.Query != "" {
		d.Path += "?" + rules.Query(c.Query)
	}
	if rules.Webhooks {
		d.WebhookID = credentials.WebhookID(c.ID)
		if c.ReplayOf != "" {
			d.ReplayOfWebhookID = credentials.WebhookID(c.ReplayOf)
		}
	}
	for _, a := range c.AttemptLog {
		d.Attempts = append(d.Attempts, api.AttemptDoc{N: a.N, Kind: string(a.Kind), StartedAt: a.StartedAt.UTC(),
			DurationMs: a.Duration.Milliseconds(), Status: a.Status, Outcome: a.Outcome, Error: rules.Text(a.Error)})
	}
	if !c.NextAttemptAt.IsZero() && !c.State.Finished() {
		t := c.NextAttemptAt.UTC()
		d.NextAttemptAt = &t
	}
	if r := c.Response; r != nil && c.State.Finished() {
		body, _ := rules.JSONBody(r.Header.Get("Content-Type"), r.Body)
		rd := &api.ResponseDoc{Status: r.Status, Headers: rules.Header(r.Header), BodyTruncated: r.Truncated}
		rd.Body, rd.BodyEncoding = Body(body)
		d.Response = rd
	}
	return d
}

// GateReader reads gates without taking a probe token, as redisstore
// Store.ReadGates: names are keyspace.PartitionGate's "endpoint/issuer".
type GateReader interface {
	ReadGates(ctx context.Context, names []string) ([]policy.Admission, []error)
}

// HeldBy is the held_by of c's status document (contract §12): the gate
// that holds it — its organisation's breaker partition (level
// organisation) or the endpoint's breaker or pause (level endpoint) — as
// gr reads it now, one round trip; nil when c is not held, the gate is no
// longer shut, or it cannot be read.
func HeldBy(ctx context.Context, gr GateReader, c *policy.Callout) *api.HeldByDoc {
	if c.State != policy.Held {
		return nil
	}
	gates, errs := gr.ReadGates(ctx, []string{keyspace.PartitionGate(c.Endpoint, c.Issuer)})
	if len(gates) != 1 || errs[0] != nil {
		return nil
	}
	g := gates[0].Gate
	if g.State != policy.GateBreakerOpen && g.State != policy.GateProbing && g.State != policy.GatePaused {
		return nil
	}
	doc := &api.HeldByDoc{Gate: g.State, Level: api.HeldByEndpoint}
	if g.Partition != "" {
		doc.Level = api.HeldByOrganisation
	}
	if !g.Until.IsZero() {
		u := g.Until.UTC()
		doc.Until = &u
	}
	return doc
}
