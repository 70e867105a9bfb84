package api

import "github.com/calloutproxy/callout-proxy/policy"

// Problem is the RFC 9457 problem document (application/problem+json) of
// every error the proxy makes itself, on both listeners (contract §2). Type
// is "urn:callout-proxy:problem:" followed by the problem's code (e.g.
// breaker-open), Title the status's reason phrase, Outcome the outcome
// class (rejected unless the problem says otherwise), CalloutID the
// callout it concerns when one exists. A problem about a callout that
// ended as a dead letter (contract §4 exhausted synchronous wait, §5 a
// repeat of its key) adds its State (dead_lettered), DeadLetterReason and
// LastOutcome, the class of its last attempt (contract §12). proxy/problem
// writes it.
type Problem struct {
	Type             string                  `json:"type"`
	Title            string                  `json:"title"`
	Status           int                     `json:"status"`
	Detail           string                  `json:"detail"`
	Outcome          policy.Outcome          `json:"outcome"`
	CalloutID        string                  `json:"callout_id,omitempty"`
	State            policy.State            `json:"state,omitempty"`
	DeadLetterReason policy.DeadLetterReason `json:"dead_letter_reason,omitempty"`
	LastOutcome      policy.Outcome          `json:"last_outcome,omitempty"`
}
