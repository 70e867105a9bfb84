package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// auditLine is the start of the audit log line of one admin write action
// (slog JSON keeps the attributes in the order they were given).
func auditLine(token, action, endpoint, result string) string {
	return `"msg":"audit","token":"` + token + `","action":"` + action + `","endpoint":"` + endpoint +
		`","result":"` + result + `"`
}

// adminAction POSTs an admin action with the ops (write) token and decodes its
// 200 answer.
func adminAction(t *testing.T, p *proxyUnderTest, path string) api.EndpointActionResult {
	t.Helper()
	var res api.EndpointActionResult
	if resp, body := admin(t, p.AdminURL, http.MethodPost, path, opsToken, &res); resp.StatusCode != http.StatusOK ||
		res.Endpoint == nil {
		t.Fatalf("POST %s = %d %s", path, resp.StatusCode, body)
	}
	return res
}

// TestE2EAdminEndpoints: the admin API over a running proxy (contract §6, §9):
// a read token lists but cannot change; a write token disables (pending
// callouts become dead letters, reason endpoint_disabled; reads and writes
// are refused with endpoint-disabled), enables and resets the breaker;
// every write action is audit-logged with the token's name.
func TestE2EAdminEndpoints(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, bareStatusHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("ops-api", up.URL, loopbackNets, singleTenant, "breaker_failures: 1",
		"breaker_probe_interval: 10m")+proctest.Endpoint("other-api", up.URL, loopbackNets)), testEnv())

	// Open the breaker and hold two writes behind it.
	p.call(t, http.MethodGet, "/callout/ops-api/status/503", nil, nil)
	var held []string
	for _, key := range []string{"adm-1", "adm-2"} {
		resp, body := p.call(t, http.MethodPost, "/callout/ops-api/status/201", strings.NewReader(`{}`), keyed(key, false))
		if d := statusDoc(t, body); resp.StatusCode != http.StatusAccepted || d.State != "held" {
			t.Fatalf("write while open = %d %+v, want 202 held", resp.StatusCode, d)
		}
		held = append(held, statusDoc(t, body).ID)
	}

	var list api.EndpointList
	if resp, body := admin(t, p.AdminURL, http.MethodGet, "/admin/v1/endpoints", viewerToken, &list); resp.StatusCode != 200 {
		t.Fatalf("list with the read token = %d %s", resp.StatusCode, body)
	}
	if len(list.Endpoints) != 2 || list.Endpoints[0].Name != "ops-api" || list.Endpoints[1].Name != "other-api" {
		t.Fatalf("endpoints = %+v, want ops-api and other-api by name", list.Endpoints)
	}
	st := endpointDoc(t, p.AdminURL, "ops-api")
	if st.Breaker != "open" || st.ConsecutiveFailures != 1 || st.BacklogItems != 2 || st.Disabled ||
		st.NextProbeAt == nil || !st.NextProbeAt.Equal(st.OpenedAt.Add(10*time.Minute)) {
		t.Fatalf("ops-api = %+v, want open, 1 failure, 2 held, probe 10m after opening", st)
	}

	t.Run("read token cannot change", func(t *testing.T) {
		for _, path := range []string{"enable", "disable", "breaker/reset"} {
			resp, body := admin(t, p.AdminURL, http.MethodPost, "/admin/v1/endpoints/ops-api/"+path, viewerToken, nil)
			wantProblem(t, resp, body, http.StatusForbidden, problem.Forbidden, policy.Rejected)
		}
		p.logs.WaitFor(t, auditLine("viewer", "disable", "ops-api", "forbidden"), 5*time.Second)
		resp, body := admin(t, p.AdminURL, http.MethodPost, "/admin/v1/endpoints/ops-api/disable", "", nil)
		wantProblem(t, resp, body, http.StatusUnauthorized, problem.Unauthorized, policy.Rejected)
		resp, body = admin(t, p.AdminURL, http.MethodPost, "/admin/v1/endpoints/nope/disable", opsToken, nil)
		wantProblem(t, resp, body, http.StatusNotFound, problem.UnknownEndpoint, policy.Rejected)
		if st := endpointDoc(t, p.AdminURL, "ops-api"); st.Disabled || st.BacklogItems != 2 {
			t.Fatalf("a refused action changed ops-api: %+v", st)
		}
	})

	t.Run("disable dead-letters pending callouts and refuses requests", func(t *testing.T) {
		res := adminAction(t, p, "/admin/v1/endpoints/ops-api/disable")
		slices.Sort(res.DeadLettered)
		slices.Sort(held)
		if !res.Changed || !slices.Equal(res.DeadLettered, held) || !res.Endpoint.Disabled ||
			res.Endpoint.DisabledReason != "admin ops" || res.Endpoint.BacklogItems != 0 {
			t.Fatalf("disable = %+v / %+v, want the held callouts %v dead-lettered", res, res.Endpoint, held)
		}
		p.logs.WaitFor(t, auditLine("ops", "disable", "ops-api", "ok"), 5*time.Second)
		for _, id := range held {
			_, body := p.call(t, http.MethodGet, "/v1/callouts/"+id, nil, nil)
			if d := statusDoc(t, body); d.State != "dead_lettered" || d.DeadLetterReason != "endpoint_disabled" {
				t.Errorf("callout %s = %+v, want a dead letter with reason endpoint_disabled", id, d)
			}
		}
		hits := up.Hits()
		resp, body := p.call(t, http.MethodGet, "/callout/ops-api/status/200", nil, nil)
		pb := wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.EndpointDisabled, policy.Rejected)
		if !strings.HasSuffix(pb.Type, "endpoint-disabled") {
			t.Errorf("problem type %q, want one ending endpoint-disabled", pb.Type)
		}
		resp, body = p.call(t, http.MethodPost, "/callout/ops-api/status/201", strings.NewReader(`{}`), keyed("adm-3", false))
		wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.EndpointDisabled, policy.Rejected)
		resp, body = p.call(t, http.MethodPost, "/callout/ops-api/status/201", strings.NewReader(`{}`), keyed("adm-4", true))
		wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.EndpointDisabled, policy.Rejected)
		if n := up.Hits(); n != hits {
			t.Errorf("a disabled endpoint forwarded %d requests", n-hits)
		}
		if got := metricValue(t, p, "callout_dead_letters_total", `endpoint="ops-api"`, `reason="endpoint_disabled"`); got != 2 {
			t.Errorf("callout_dead_letters_total{reason=endpoint_disabled} = %v, want 2", got)
		}
		if got := metricValue(t, p, "callout_breaker_transitions_total", `endpoint="ops-api"`, `to="disabled"`); got != 1 {
			t.Errorf("callout_breaker_transitions_total{to=disabled} = %v, want 1", got)
		}
	})

	t.Run("enable brings it back", func(t *testing.T) {
		res := adminAction(t, p, "/admin/v1/endpoints/ops-api/enable")
		if !res.Changed || res.Endpoint.Disabled || res.Endpoint.Breaker != "closed" || res.Endpoint.Gate != "open" {
			t.Fatalf("enable = %+v / %+v", res, res.Endpoint)
		}
		p.logs.WaitFor(t, auditLine("ops", "enable", "ops-api", "ok"), 5*time.Second)
		resp, body := p.call(t, http.MethodGet, "/callout/ops-api/status/200", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
	})

	t.Run("breaker reset closes it", func(t *testing.T) {
		p.call(t, http.MethodGet, "/callout/ops-api/status/503", nil, nil)
		resp, body := p.call(t, http.MethodGet, "/callout/ops-api/status/200", nil, nil)
		wantProblem(t, resp, body, http.StatusServiceUnavailable, problem.BreakerOpen, policy.Rejected)
		res := adminAction(t, p, "/admin/v1/endpoints/ops-api/breaker/reset")
		if !res.Changed || res.Endpoint.Breaker != "closed" || res.Endpoint.ConsecutiveFailures != 0 {
			t.Fatalf("reset = %+v / %+v", res, res.Endpoint)
		}
		p.logs.WaitFor(t, auditLine("ops", "breaker_reset", "ops-api", "ok"), 5*time.Second)
		resp, body = p.call(t, http.MethodGet, "/callout/ops-api/status/200", nil, nil)
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
	})
}
