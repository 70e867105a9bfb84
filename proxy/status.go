package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

// StatusDocument is the JSON of GET /v1/callouts/{id} and of every 202
// (SPEC §4). Times are RFC 3339 with milliseconds, durations whole
// milliseconds. Secrets are redacted (SPEC §7).
type StatusDocument struct {
	ID               string         `json:"id"`
	Endpoint         string         `json:"endpoint"`
	Method           string         `json:"method"`
	Path             string         `json:"path"`
	IdempotencyKey   string         `json:"idempotency_key,omitempty"`
	SourceRecord     string         `json:"source_record,omitempty"`
	State            policy.State   `json:"state"`
	Outcome          policy.Outcome `json:"outcome"`
	Attempts         []AttemptDoc   `json:"attempts"`
	NextAttemptAt    *time.Time     `json:"next_attempt_at,omitempty"`
	ReplayOf         string         `json:"replay_of,omitempty"`
	DeadLetterReason string         `json:"dead_letter_reason,omitempty"`
	LastError        string         `json:"last_error,omitempty"`
	Response         *ResponseDoc   `json:"response,omitempty"`
}

// AttemptDoc is one attempt of a status document.
type AttemptDoc struct {
	N          int            `json:"n"`
	Kind       string         `json:"kind"`
	StartedAt  time.Time      `json:"started_at"`
	DurationMs int64          `json:"duration_ms"`
	Status     int            `json:"status,omitempty"`
	Outcome    policy.Outcome `json:"outcome"`
	Error      string         `json:"error,omitempty"`
}

// ResponseDoc is the final upstream response of a finished callout. Body is
// text when it is valid UTF-8, else base64 with BodyEncoding "base64";
// BodyTruncated when the proxy kept only its first bytes.
type ResponseDoc struct {
	Status        int         `json:"status"`
	Headers       http.Header `json:"headers"`
	Body          string      `json:"body"`
	BodyEncoding  string      `json:"body_encoding,omitempty"`
	BodyTruncated bool        `json:"body_truncated,omitempty"`
}

// stateOutcome is the outcome class a callout in state st reports: work
// that continues is retryable (SPEC §2: every 202), a dead letter is
// permanent (the proxy will not try it again; a replay is a new chain).
func stateOutcome(st policy.State) policy.Outcome {
	switch st {
	case policy.Succeeded:
		return policy.Success
	case policy.Failed, policy.DeadLettered:
		return policy.Permanent
	}
	return policy.Retryable
}

// statusDocument renders c with ep's redaction rules.
func statusDocument(c *policy.Callout, rules *redact.Rules) StatusDocument {
	d := StatusDocument{
		ID: c.ID, Endpoint: c.Endpoint, Method: c.Method, Path: c.Path, IdempotencyKey: c.IdempotencyKey,
		SourceRecord: c.SourceRecord, State: c.State, Outcome: stateOutcome(c.State), ReplayOf: c.ReplayOf,
		DeadLetterReason: string(c.DeadLetterReason), LastError: rules.Text(c.LastError),
		Attempts: make([]AttemptDoc, 0, len(c.AttemptLog)),
	}
	if c.Query != "" {
		d.Path += "?" + rules.Query(c.Query)
	}
	for _, a := range c.AttemptLog {
		d.Attempts = append(d.Attempts, AttemptDoc{N: a.N, Kind: string(a.Kind), StartedAt: a.StartedAt.UTC(),
			DurationMs: a.Duration.Milliseconds(), Status: a.Status, Outcome: a.Outcome, Error: rules.Text(a.Error)})
	}
	if !c.NextAttemptAt.IsZero() && !c.State.Finished() {
		t := c.NextAttemptAt.UTC()
		d.NextAttemptAt = &t
	}
	if r := c.Response; r != nil && c.State.Finished() {
		body, _ := rules.JSONBody(r.Header.Get("Content-Type"), r.Body)
		rd := &ResponseDoc{Status: r.Status, Headers: rules.Header(r.Header), BodyTruncated: r.Truncated}
		if utf8.Valid(body) {
			rd.Body = string(body)
		} else {
			rd.Body, rd.BodyEncoding = base64.StdEncoding.EncodeToString(body), "base64"
		}
		d.Response = rd
	}
	return d
}

// rulesFor is the redaction of endpoint name; the defaults when it is no
// longer configured.
func (s *Server) rulesFor(name string) *redact.Rules {
	if r, ok := s.rules[name]; ok {
		return r
	}
	return redact.New(config.Redact{}, nil)
}

// accepted answers 202 with the status document of callout id (SPEC §4):
// Callout-Outcome retryable, Location, Preference-Applied when a
// preference was honoured. When the record cannot be read back the 202
// still goes out, with the id alone: the callout is recorded.
func (s *Server) accepted(ctx context.Context, w http.ResponseWriter, endpoint, id, applied string) {
	gctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	c, err := s.d.Store.Get(gctx, id)
	if err != nil {
		s.d.Logger.Warn("status document unavailable for a 202", "callout_id", id, "error", err)
		writeAccepted(w, id, applied, nil)
		return
	}
	doc := statusDocument(c, s.rulesFor(endpoint))
	writeAccepted(w, id, applied, &doc)
}

// writeAccepted writes a 202 with doc (or a minimal one holding the id).
func writeAccepted(w http.ResponseWriter, id, applied string, doc *StatusDocument) {
	h := w.Header()
	h.Set("Callout-Outcome", string(policy.Retryable))
	h.Set("Callout-Id", id)
	h.Set("Location", "/v1/callouts/"+id)
	if applied != "" {
		h.Set("Preference-Applied", applied)
	}
	if doc == nil {
		writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "state": string(policy.Scheduled),
			"outcome": string(policy.Retryable)})
		return
	}
	writeJSON(w, http.StatusAccepted, doc)
}

// handleGetCallout serves GET /v1/callouts/{id}: the status document, only
// to callers of the callout's own organisation (same JWT issuer). Another
// org's callout is answered 404, as if it did not exist.
func (s *Server) handleGetCallout() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, err := s.d.Callers.Verify(r.Header.Get("Authorization"))
		if err != nil {
			problem.Write(w, err)
			return
		}
		id := chi.URLParam(r, "id")
		c, err := s.d.Store.Get(r.Context(), id)
		switch {
		case errors.Is(err, policy.ErrNotFound) || (err == nil && c.Issuer != caller.Issuer):
			problem.Write(w, problem.Errorf(problem.NotFound, "no callout "+strconv.Quote(id)+" for this organisation"))
			return
		case err != nil:
			problem.Write(w, problem.FromStore(err))
			return
		}
		w.Header().Set("Callout-Id", c.ID)
		w.Header().Set("Callout-Outcome", string(stateOutcome(c.State)))
		writeJSON(w, http.StatusOK, statusDocument(c, s.rulesFor(c.Endpoint)))
	}
}

// PolicyDocument is GET /v1/policy: the policy in force and its backoff
// envelope (SPEC §3). Durations are Go duration strings.
type PolicyDocument struct {
	MaxAttempts          int             `json:"max_attempts"`
	MaxAge               string          `json:"max_age"`
	BaseDelay            string          `json:"base_delay"`
	Multiplier           float64         `json:"multiplier"`
	MaxDelay             string          `json:"max_delay"`
	RetryAfterCap        string          `json:"retry_after_cap"`
	ConnectTimeout       string          `json:"connect_timeout"`
	HeaderTimeout        string          `json:"header_timeout"`
	AttemptTimeout       string          `json:"attempt_timeout"`
	BreakerFailures      int             `json:"breaker_failures"`
	BreakerProbeInterval string          `json:"breaker_probe_interval"`
	DisableAfter         string          `json:"disable_after"`
	IdempotencyRetention string          `json:"idempotency_retention"`
	DeadLetterRetention  string          `json:"dead_letter_retention"`
	MaxRequestBytes      int64           `json:"max_request_bytes"`
	MaxResponseBytes     int64           `json:"max_response_bytes"`
	Envelope             policy.Envelope `json:"envelope"`
}

// handleGetPolicy serves GET /v1/policy to any authenticated caller.
func (s *Server) handleGetPolicy() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.d.Callers.Verify(r.Header.Get("Authorization")); err != nil {
			problem.Write(w, err)
			return
		}
		p := s.d.Config.Policy
		writeJSON(w, http.StatusOK, PolicyDocument{
			MaxAttempts: p.MaxAttempts, MaxAge: p.MaxAge.String(), BaseDelay: p.BaseDelay.String(),
			Multiplier: p.Multiplier, MaxDelay: p.MaxDelay.String(), RetryAfterCap: p.RetryAfterCap.String(),
			ConnectTimeout: p.ConnectTimeout.String(), HeaderTimeout: p.HeaderTimeout.String(),
			AttemptTimeout: p.AttemptTimeout.String(), BreakerFailures: p.BreakerFailures,
			BreakerProbeInterval: p.BreakerProbeInterval.String(), DisableAfter: p.DisableAfter.String(),
			IdempotencyRetention: p.IdempotencyRetention.String(),
			DeadLetterRetention:  p.DeadLetterRetention.String(),
			MaxRequestBytes:      p.MaxRequestBytes, MaxResponseBytes: p.MaxResponseBytes,
			Envelope: policy.BackoffEnvelope(p),
		})
	}
}

// formatSeconds is d in whole seconds, for Preference-Applied: wait=N.
func formatSeconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
