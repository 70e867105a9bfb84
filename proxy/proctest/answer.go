package proctest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// NewClient is an HTTP client for the proxies of a test: it follows no
// redirect, so a test sees what the proxy sent, takes no HTTP proxy from
// the environment, asks for no compression and keeps up to maxIdle idle
// connections a host (0: net/http's default). A client made for one test
// has it close its idle connections when it ends
// (t.Cleanup(c.CloseIdleConnections)).
func NewClient(timeout time.Duration, maxIdle int) *http.Client {
	return &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: maxIdle},
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Answer is a response with its whole body read.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Send makes one request with c: method, url, the header fields of hdr and
// body ("" for none). It returns errors instead of failing a test, so it
// may run on any goroutine; when the body cannot be read to its end, the
// answer has what was read.
func Send(c *http.Client, method, url string, hdr http.Header, body string) (Answer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

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
