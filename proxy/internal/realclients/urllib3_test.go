package realclients

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"testing"
)

// python is the interpreter that runs urllib3_client.py: $CALLOUT_PYTHON,
// else python3. Without requests and urllib3 the tests skip, unless
// CALLOUT_REQUIRE_PYTHON_CLIENTS=1 (.ci/hostile.sh sets it after making
// sure they are installed) makes that a failure.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("CALLOUT_PYTHON")
	if py == "" {
		py = "python3"
	}
	if out, err := exec.Command(py, "-c", "import requests, urllib3").CombinedOutput(); err != nil {
		if os.Getenv("CALLOUT_REQUIRE_PYTHON_CLIENTS") == "1" {
			t.Fatalf("%s cannot import requests and urllib3: %v %s", py, err, out)
		}
		t.Skipf("%s cannot import requests and urllib3 (.ci/hostile.sh installs them): %s", py, out)
	}
	return py
}

// pyResult is what urllib3_client.py prints.
type pyResult struct {
	Status   int    `json:"status"`
	Outcome  string `json:"outcome"`
	Problem  string `json:"problem"`
	Replayed string `json:"replayed"`
	Body     string `json:"body"`
	Retried  []*int `json:"retried"` // statuses of the retried tries, nil for no answer
}

// runPython starts urllib3_client.py with args and returns a function
// that waits for its result.
func runPython(t *testing.T, args ...string) func() pyResult {
	t.Helper()
	cmd := exec.Command(python(t), append([]string{"urllib3_client.py"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() pyResult {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("urllib3_client.py %v: %v\n%s", args, err, errOut.String())
		}
		var r pyResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("urllib3_client.py printed %q: %v", out.String(), err)
		}
		return r
	}
}

// statuses renders retried tries for messages (0 for no answer).
func statuses(r pyResult) []int {
	var out []int
	for _, s := range r.Retried {
		if s == nil {
			out = append(out, 0)
		} else {
			out = append(out, *s)
		}
	}
	return out
}

// TestURLLib3WaitsOutItsOwnInFlightCallout: requests with urllib3's
// Retry, following Callout-Outcome, sends a keyed POST whose synchronous
// attempt outlasts its 1 s read timeout; it retries (a read error), meets
// 409 in-flight with Retry-After 1, class rejected, which the recipe
// retries (409 in status_forcelist, in-flight let through), sleeping
// Retry-After, until it gets the first attempt's 201, replayed. The
// upstream is called once.
func TestURLLib3WaitsOutItsOwnInFlightCallout(t *testing.T) {
	g := newGenericRig(t)
	wait := runPython(t, "outcome", "POST", g.p.URL+"/callout/api/v1/charges", g.token, "urllib3-inflight-1")
	if !g.releaseAfterInFlight(t) {
		t.Fatal("no retry met the in-flight callout within 60 s")
	}
	r := wait()
	tries := statuses(r)
	if r.Status != 201 || r.Replayed != "true" || r.Body != `{"id":"ch_1"}` {
		t.Errorf("final answer %+v, want the first attempt's 201, replayed", r)
	}
	if len(tries) < 2 || tries[0] != 0 || !slices.Contains(tries, 409) {
		t.Errorf("retried tries %v, want a read timeout first, then at least one 409 in-flight", tries)
	}
	g.wantChargedOnce(t)
}

// TestURLLib3DefaultsStopAtInFlight: urllib3's Retry, with its defaults or
// with 503 in status_forcelist, does not retry a 409: a duplicate of a
// keyed POST whose first attempt is still held upstream gets the 409
// in-flight (class rejected) back, sent once.
func TestURLLib3DefaultsStopAtInFlight(t *testing.T) {
	g := newGenericRig(t)
	defer g.upstream.Release()
	first := g.holdFirst(t, "urllib3-default-1")
	for i, policy := range []string{"default", "forcelist"} {
		t.Run(policy, func(t *testing.T) {
			r := runPython(t, policy, "POST", g.p.URL+"/callout/api/v1/charges", g.token, "urllib3-default-1")()
			if r.Status != 409 || r.Outcome != "rejected" || r.Problem != "in-flight" || len(r.Retried) != 0 {
				t.Errorf("final answer %+v, want 409 rejected in-flight, not retried", r)
			}
			if n := g.rejectedCount(t, "api", "in-flight"); n != i+1 {
				t.Errorf("the proxy answered in-flight %d times, want %d (no retry)", n, i+1)
			}
		})
	}
	g.upstream.Release()
	if r := first(); r.StatusCode != http.StatusCreated {
		t.Errorf("first request: %d, want 201", r.StatusCode)
	}
}

// TestURLLib3AndRejected503s: a 503 the proxy classes rejected (endpoint
// disabled, no Retry-After) is retried by a Retry with 503 in its
// status_forcelist, not by urllib3's defaults (a 503 without Retry-After),
// and not by FollowCalloutOutcome, which returns it at once.
func TestURLLib3AndRejected503s(t *testing.T) {
	g := newGenericRig(t)
	for _, tt := range []struct {
		policy string
		sent   int
	}{{"forcelist", 3}, {"default", 1}, {"outcome", 1}} {
		t.Run(tt.policy, func(t *testing.T) {
			before := g.rejectedCount(t, "off", "endpoint-disabled")
			r := runPython(t, tt.policy, "GET", g.p.URL+"/callout/off/v1/status", g.token)()
			if r.Status != 503 || r.Outcome != "rejected" || r.Problem != "endpoint-disabled" {
				t.Errorf("final answer %+v, want 503 rejected endpoint-disabled", r)
			}
			if got := g.rejectedCount(t, "off", "endpoint-disabled") - before; got != tt.sent {
				t.Errorf("the proxy refused %d requests (retried %v), want %d", got, statuses(r), tt.sent)
			}
		})
	}
}
