package proctest

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// ReadBody reads resp's whole body and closes it, failing t when the read
// fails.
func ReadBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WantProblem asserts that an answer (its status, header and whole body)
// is a proxy-made error of docs/contract.md §2: the status, the
// Callout-Outcome header out, Content-Type application/problem+json, and
// a body whose type ends in code, whose status and outcome agree and
// whose title and detail are set. It returns the decoded body; it fails
// the test at once when the body is not JSON.
func WantProblem(t testing.TB, gotStatus int, header http.Header, body []byte, status int, code problem.Code,
	out policy.Outcome) problem.Body {
	t.Helper()
	if gotStatus != status {
		t.Errorf("status = %d, want %d; body %s", gotStatus, status, body)
	}
	if got := header.Get("Callout-Outcome"); got != string(out) {
		t.Errorf("Callout-Outcome = %q, want %q", got, out)
	}
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var pb problem.Body
	if err := json.Unmarshal(body, &pb); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	if want := problem.TypeBase + string(code); pb.Type != want {
		t.Errorf("problem type = %q, want %q (detail %q)", pb.Type, want, pb.Detail)
	}
	if pb.Status != status {
		t.Errorf("problem status = %d, want %d", pb.Status, status)
	}
	if pb.Outcome != out {
		t.Errorf("problem outcome = %q, want %q", pb.Outcome, out)
	}
	if pb.Title == "" || pb.Detail == "" {
		t.Errorf("problem title %q / detail %q: both must be set", pb.Title, pb.Detail)
	}
	return pb
}
