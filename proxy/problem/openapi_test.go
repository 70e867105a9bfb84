package problem_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/internal/openapicheck"
	"github.com/calloutproxy/callout-proxy/proxy/internal/srctest"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// TestOpenAPIProblemTypes: docs/openapi/problem.yaml lists every problem
// code the proxy can send (problem.Codes), each with its HTTP status, as
// the type enum and in x-problem-types, and no other; its Problem schema
// has the fields of the problem body; every Code constant has a status
// (so none escapes the list); the shared words (classes, states,
// dead-letter reasons) are the code's.
func TestOpenAPIProblemTypes(t *testing.T) {
	doc := openapicheck.Load(t, "problem.yaml")
	pb := doc.Components.Schemas["Problem"].Value
	var enum []string
	for _, v := range pb.Properties["type"].Value.Enum {
		enum = append(enum, strings.TrimPrefix(v.(string), problem.TypeBase))
	}
	listed, _ := pb.Extensions["x-problem-types"].(map[string]any)
	var codes []string
	for _, c := range problem.Codes() {
		codes = append(codes, string(c))
		entry, _ := listed[string(c)].(map[string]any)
		if st, _ := entry["status"].(float64); int(st) != c.Status() {
			t.Errorf("x-problem-types %s: status %v, want %d", c, entry["status"], c.Status())
		}
		if d, _ := entry["description"].(string); d == "" {
			t.Errorf("x-problem-types %s: no description", c)
		}
	}
	slices.Sort(enum)
	if !slices.Equal(enum, codes) {
		t.Errorf("problem types in problem.yaml %v, want problem.Codes() %v", enum, codes)
	}
	if len(listed) != len(codes) {
		t.Errorf("x-problem-types has %d codes, want the %d of problem.Codes()", len(listed), len(codes))
	}
	if declared := declaredCodes(t); !slices.Equal(declared, codes) {
		t.Errorf("the Code constants of problem.go %v are not the codes with a status %v", declared, codes)
	}
	openapicheck.Schemas(t, doc, map[string]any{"Problem": api.Problem{}})
	openapicheck.Enum(t, doc, "Outcome", policy.Success, policy.Retryable, policy.Permanent, policy.Rejected)
	openapicheck.Enum(t, doc, "State", policy.Scheduled, policy.InFlight, policy.Held, policy.Succeeded,
		policy.Failed, policy.DeadLettered)
	openapicheck.Enum(t, doc, "DeadLetterReason", policy.DeadLetterReasons...)
}

// declaredCodes are the values of the Code constants problem.go declares,
// sorted: what the code can send, each of which must have a status (and so
// be in problem.Codes and problem.yaml).
func declaredCodes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, c := range srctest.StringConsts(t, "problem.go") {
		if c.Type == "Code" {
			out = append(out, c.Value)
		}
	}
	slices.Sort(out)
	return out
}
