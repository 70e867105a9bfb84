package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// throttleDo sends one admin request from remoteAddr with the
// Authorization value authz.
func throttleDo(e *admEnv, method, path, remoteAddr, authz string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, http.NoBody)
	r.RemoteAddr = remoteAddr
	r.Header.Set("Authorization", authz)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// TestAdminLoginThrottle: with the defaults (10 failures a minute), 15
// wrong tokens at a write route from one address are 10 × 401 then 5 ×
// 429 login-throttled with Retry-After 60 (then 30, half a minute on),
// and one audit line; a wrong read counts too but writes none; the right
// token from the same address is accepted while it is throttled; another
// address is not throttled; once the minute is over, the next admin
// request writes one line with the minute's count and the address is
// served 401 again.
func TestAdminLoginThrottle(t *testing.T) {
	store := &fakeEndpointStore{EndpointStateFn: func(context.Context, string) (policy.EndpointState, error) {
		return policy.EndpointState{}, nil
	}}
	e := newAdmEnv(t, redistest.Backend{}, store)
	const src = "203.0.113.9:40000"
	codes := map[int]int{}
	for i := range 15 {
		if i == 12 {
			e.now = e.now.Add(30 * time.Second)
		}
		w := throttleDo(e, http.MethodPost, "/admin/v1/endpoints/pay-api/enable", src,
			"Bearer wrong-"+strconv.Itoa(1000+i)+"-0123456789abcdef")
		codes[w.Code]++
		if i == 10 {
			wantProblem(t, w, problem.LoginThrottled)
			if got := w.Header().Get("Retry-After"); got != "60" {
				t.Errorf("11th failure: Retry-After %q, want 60", got)
			}
		}
		if i == 12 && w.Header().Get("Retry-After") != "30" {
			t.Errorf("13th failure 30 s on: Retry-After %q, want 30", w.Header().Get("Retry-After"))
		}
	}
	if codes[401] != 10 || codes[429] != 5 {
		t.Fatalf("statuses %v, want 10 × 401 and 5 × 429", codes)
	}
	if w := throttleDo(e, http.MethodGet, "/admin/v1/endpoints", src, "Bearer wrong-read-0123456789abcdef"); w.Code != 429 {
		t.Errorf("a wrong read from the throttled address: %d, want 429", w.Code)
	}
	if a := e.audits(t); len(a) != 1 || a[0]["action"] != "enable" || a[0]["result"] != "unauthorized" {
		t.Fatalf("audit lines %v, want the first failure's only", a)
	}
	if w := throttleDo(e, http.MethodGet, "/admin/v1/endpoints", src, "Bearer "+admReadToken); w.Code != 200 {
		t.Fatalf("the right token from the throttled address: %d %s, want 200", w.Code, w.Body)
	}
	if w := throttleDo(e, http.MethodPost, "/admin/v1/endpoints/pay-api/enable", "198.51.100.4:1",
		"Bearer other-0123456789abcdef"); w.Code != 401 {
		t.Errorf("another address: %d, want 401", w.Code)
	}
	// Every failure is counted by its answer: 10 + 1 (the other address)
	// answered 401, 5 + 1 (the wrong read) throttled.
	for result, want := range map[string]float64{"unauthorized": 11, "throttled": 6} {
		if got := testutil.ToFloat64(e.metrics.LoginFailures.WithLabelValues(result)); got != want {
			t.Errorf("callout_admin_login_failures_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	e.now = e.now.Add(30 * time.Second)
	if w := throttleDo(e, http.MethodGet, "/admin/v1/endpoints", "192.0.2.200:1", "Bearer "+admReadToken); w.Code != 200 {
		t.Fatalf("the right token: %d", w.Code)
	}
	var summary map[string]any
	for _, a := range e.audits(t) {
		if a["result"] == "unauthorized_repeated" && a["remote_addr"] == "203.0.113.9" {
			summary = a
		}
	}
	if summary == nil || summary["failures"] != 16.0 || summary["throttled"] != 6.0 {
		t.Fatalf("the minute's line %v, want 16 failures, 6 throttled, from 203.0.113.9", summary)
	}
	if w := throttleDo(e, http.MethodPost, "/admin/v1/endpoints/pay-api/enable", src, "Bearer wrong-again-0123456789"); w.Code != 401 {
		t.Errorf("after the window: %d, want 401", w.Code)
	}
}
