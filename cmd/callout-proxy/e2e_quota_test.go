package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// One organisation cannot fill an endpoint that others share (contract §10):
// with two issuers configured, each gets a fair share of max_backlog_items
// by default. Org A's respond-async writes are refused backlog-full, naming
// its share, once it holds half; org B's are still accepted.
func TestOrganisationShareOfTheBacklog(t *testing.T) {
	// The upstream fails and the next attempt is an hour away, so every
	// accepted callout stays pending for the whole test.
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	p := startProxy(t, withPolicy(devConfig(proctest.Endpoint("shared", up.URL, "allowed_networks: [127.0.0.0/8]",
		"max_backlog_items: 4")), "base_delay: 1h", "max_delay: 1h"), testEnv())
	const orgB = "https://sandbox--uat.sandbox.my.salesforce.com"
	write := func(iss string, i int) (*http.Response, []byte) {
		return p.call(t, http.MethodPost, "/callout/shared/v1/items", strings.NewReader(`{"n":1}`), http.Header{
			"Authorization":   {bearer(t, iss)},
			"Prefer":          {"respond-async"},
			"Idempotency-Key": {fmt.Sprintf("%s-%d", iss[8:11], i)},
		})
	}
	for i := range 2 {
		if resp, body := write(testIssuer, i); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("org A write %d = %d %s, want 202", i, resp.StatusCode, body)
		}
	}
	resp, body := write(testIssuer, 2)
	pb := wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.BacklogFull, policy.Rejected)
	if !strings.Contains(pb.Detail, "organisation's share") {
		t.Errorf("detail %q does not say it is the organisation's share", pb.Detail)
	}
	for i := range 2 {
		if resp, body := write(orgB, i); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("org B write %d while org A is at its share = %d %s, want 202", i, resp.StatusCode, body)
		}
	}
}
