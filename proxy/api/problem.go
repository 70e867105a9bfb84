package api

import "github.com/calloutproxy/callout-proxy/policy"

// Problem is the RFC 9457 problem document (application/problem+json) of
// every error the proxy makes itself, on both listeners (contract §2). Type
// is "urn:callout-proxy:problem:" followed by the problem's code (e.g.
// breaker-open), Title the status's reason phrase, Outcome the outcome
// class (rejected unless the problem says otherwise), CalloutID the
// callout it concerns when one exists. proxy/problem writes it.
type Problem struct {
	Type      string         `json:"type"`
	Title     string         `json:"title"`
	Status    int            `json:"status"`
	Detail    string         `json:"detail"`
	Outcome   policy.Outcome `json:"outcome"`
	CalloutID string         `json:"callout_id,omitempty"`
}
