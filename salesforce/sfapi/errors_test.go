package sfapi

import (
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestDailyLimitStillPauses: the daily limit's message keeps the long
// pause (limit_pause).
func TestDailyLimitStillPauses(t *testing.T) {
	for _, c := range []struct {
		body string
		want Class
	}{
		{sfemu.LimitExceeded, LimitExceeded}, {sfemu.ConcurrentLimitExceeded, ConcurrentLimit},
		{`[{"message":"ConcurrentRequests (Concurrent API Requests) Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`,
			ConcurrentLimit},
	} {
		if got := parseError("x", 403, []byte(c.body)).Class; got != c.want {
			t.Errorf("%s: class %s, want %s", c.body, got, c.want)
		}
	}
}

// TestErrorBodiesClassified: Salesforce's own refusals carry its JSON error
// list and stay what they say ("Status Codes and Error Responses"); an
// empty 401 is a session to renew (docs/salesforce.md "What the writer
// does about each answer").
func TestErrorBodiesClassified(t *testing.T) {
	for body, want := range map[string]Class{
		`[{"message":"The requested resource does not exist","errorCode":"NOT_FOUND"}]`:    Rejected,
		`[{"message":"API is disabled for this User","errorCode":"API_DISABLED_FOR_ORG"}]`: Rejected,
		``: InvalidSession,
	} {
		status := http.StatusForbidden
		if body == "" {
			status = http.StatusUnauthorized
		}
		if got := parseError("composite", status, []byte(body)).Class; got != want {
			t.Errorf("%d %s: class %s, want %s", status, body, got, want)
		}
	}
}
