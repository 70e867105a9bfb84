package admin

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// TestAdminDisableEnable: disabling dead-letters every pending callout
// (reason endpoint_disabled), hands them to Events, counts them and writes
// the audit line; a second disable changes nothing; enable starts afresh.
func TestAdminDisableEnable(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		e := newAdmEnv(t, b, nil)
		e.openPayBreaker(t)
		var ids []string
		for _, key := range []string{"k1", "k2", "k3"} {
			r, err := e.store.Enqueue(t.Context(), policy.NewCallout{Endpoint: "pay-api", Issuer: "org",
				Method: "POST", Path: "/v1/charges", Body: []byte("{}"), IdempotencyKey: key},
				policy.EnqueueOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		res := e.action(t, "/admin/v1/endpoints/pay-api/disable", `{"reason": "upstream retired"}`)
		if !res.Changed || len(res.DeadLettered) != 3 || res.Endpoint == nil || !res.Endpoint.Disabled ||
			res.Endpoint.Gate != "disabled" || res.Endpoint.BacklogItems != 0 || res.Endpoint.DeadLetters != 3 ||
			res.Endpoint.DisabledReason != "admin ops: upstream retired" {
			t.Fatalf("disable = %+v / %+v", res, res.Endpoint)
		}
		e.wantAudit(t, "ops", "disable", "pay-api", "ok")
		if a := e.audits(t); a[len(a)-1]["reason"] != "upstream retired" || a[len(a)-1]["dead_lettered"] != 3.0 {
			t.Errorf("audit line %v, want the reason and 3 dead letters", a[len(a)-1])
		}
		for _, id := range ids {
			c, err := e.store.Get(t.Context(), id)
			if err != nil || c.State != policy.DeadLettered || c.DeadLetterReason != policy.DeadLetterEndpointDisabled {
				t.Fatalf("callout %s after disable = %+v, %v", id, c, err)
			}
		}
		if len(e.events.got) != 3 || e.events.got[0].Reason != policy.DeadLetterEndpointDisabled ||
			e.events.got[0].State != policy.DeadLettered {
			t.Fatalf("events = %+v, want 3 endpoint_disabled dead letters", e.events.got)
		}
		if n := testutil.ToFloat64(e.metrics.DeadLetters.WithLabelValues("pay-api", "endpoint_disabled")); n != 3 {
			t.Errorf("callout_dead_letters_total = %v, want 3", n)
		}
		if n := testutil.ToFloat64(e.metrics.BreakerTransitions.WithLabelValues("pay-api", "disabled")); n != 1 {
			t.Errorf("transitions to disabled = %v, want 1", n)
		}

		res = e.action(t, "/admin/v1/endpoints/pay-api/disable", "")
		if res.Changed || len(res.DeadLettered) != 0 || res.Endpoint.DisabledReason != "admin ops: upstream retired" {
			t.Fatalf("second disable = %+v, want unchanged, first reason kept", res)
		}

		res = e.action(t, "/admin/v1/endpoints/pay-api/enable", "")
		if !res.Changed || res.Endpoint.Disabled || res.Endpoint.Breaker != "closed" ||
			res.Endpoint.ConsecutiveFailures != 0 || res.Endpoint.Gate != "open" || res.Endpoint.DeadLetters != 3 {
			t.Fatalf("enable = %+v / %+v", res, res.Endpoint)
		}
		e.wantAudit(t, "ops", "enable", "pay-api", "ok")
		res = e.action(t, "/admin/v1/endpoints/pay-api/enable", "")
		if res.Changed {
			t.Fatalf("enabling an enabled endpoint = %+v, want unchanged", res)
		}
		// callout_breaker_state went disabled → closed: one transition to
		// closed, in the breaker state's words (no "enabled").
		if n := testutil.ToFloat64(e.metrics.BreakerTransitions.WithLabelValues("pay-api", "closed")); n != 1 {
			t.Errorf("transitions to closed after the enable = %v, want 1", n)
		}
		if n := testutil.CollectAndCount(e.metrics.BreakerTransitions); n != 2 {
			t.Errorf("%d transition series, want disabled and closed only", n)
		}
	})
}

// TestAdminBreakerReset: reset closes an open breaker and lifts a pause;
// it leaves a disabled endpoint disabled.
func TestAdminBreakerReset(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		e := newAdmEnv(t, b, nil)
		e.openPayBreaker(t)
		if _, err := e.store.RecordResult(t.Context(), "pay-api", policy.ReadResult{
			PausedUntil: admT0.Add(time.Hour), Breaker: policy.BreakerSettings{Failures: 2}}); err != nil {
			t.Fatal(err)
		}
		res := e.action(t, "/admin/v1/endpoints/pay-api/breaker/reset", "")
		if !res.Changed || res.Action != "breaker_reset" || res.Endpoint.Breaker != "closed" ||
			res.Endpoint.Gate != "open" || res.Endpoint.PausedUntil != nil || res.Endpoint.ConsecutiveFailures != 0 ||
			res.Endpoint.OpenedAt != nil || res.Endpoint.NextProbeAt != nil {
			t.Fatalf("reset = %+v / %+v", res, res.Endpoint)
		}
		e.wantAudit(t, "ops", "breaker_reset", "pay-api", "ok")
		if n := testutil.ToFloat64(e.metrics.BreakerTransitions.WithLabelValues("pay-api", "closed")); n != 1 {
			t.Errorf("transitions to closed = %v, want 1", n)
		}
		res = e.action(t, "/admin/v1/endpoints/pay-api/breaker/reset", "")
		if res.Changed {
			t.Fatalf("resetting a closed breaker = %+v, want unchanged", res)
		}
		e.action(t, "/admin/v1/endpoints/crm-api/disable", "")
		res = e.action(t, "/admin/v1/endpoints/crm-api/breaker/reset", "")
		if !res.Endpoint.Disabled || res.Endpoint.DisabledReason != "admin ops" {
			t.Fatalf("reset of a disabled endpoint = %+v, want it still disabled", res.Endpoint)
		}
	})
}

// admFailingStore describes an EndpointStore whose calls fail: Disable
// after having dead-lettered one callout, as a drain cut short does.
type admFailingStore struct{ stateErr, actionErr error }

// fake is the store f describes.
func (f admFailingStore) fake() *fakeEndpointStore {
	return &fakeEndpointStore{
		EndpointStateFn: func(context.Context, string) (policy.EndpointState, error) {
			return policy.EndpointState{Breaker: policy.BreakerClosed}, f.stateErr
		},
		EnableFn:       func(context.Context, string) error { return f.actionErr },
		ResetBreakerFn: func(context.Context, string) error { return f.actionErr },
		DisableFn: func(context.Context, string, string) (policy.DisableResult, error) {
			return policy.DisableResult{Newly: true, DeadLettered: []string{"dl-1"}}, f.actionErr
		},
	}
}

// TestAdminStoreErrors: a store failure is a 503 store-unavailable problem
// and an audit line with that result; dead letters made before a failed
// drain are still handed on.
func TestAdminStoreErrors(t *testing.T) {
	down := policy.ErrUnavailable
	tests := []struct {
		name, method, path string
		store              admFailingStore
		wantEvents         int
		action             string // the audit line's action; "" = a read, no audit line
	}{
		{"list", "GET", "/admin/v1/endpoints", admFailingStore{stateErr: down}, 0, ""},
		{"get", "GET", "/admin/v1/endpoints/pay-api", admFailingStore{stateErr: down}, 0, ""},
		{"state before enable", "POST", "/admin/v1/endpoints/pay-api/enable", admFailingStore{stateErr: down}, 0, "enable"},
		{"enable", "POST", "/admin/v1/endpoints/pay-api/enable", admFailingStore{actionErr: down}, 0, "enable"},
		{"reset", "POST", "/admin/v1/endpoints/pay-api/breaker/reset", admFailingStore{actionErr: down}, 0,
			"breaker_reset"},
		{"disable cut short", "POST", "/admin/v1/endpoints/pay-api/disable", admFailingStore{actionErr: down}, 1,
			"disable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newAdmEnv(t, redistest.Backend{}, tt.store.fake())
			wantProblem(t, e.do(t, tt.method, tt.path, admWriteToken, ""), problem.StoreUnavailable)
			if len(e.events.got) != tt.wantEvents {
				t.Errorf("events = %+v, want %d", e.events.got, tt.wantEvents)
			}
			if tt.action == "" {
				if n := len(e.audits(t)); n != 0 {
					t.Fatalf("%d audit lines for a read, want none", n)
				}
				return
			}
			e.wantAudit(t, "ops", tt.action, "pay-api", "store_unavailable")
			if last := e.audits(t)[0]; last["cause"] == nil || last["level"] != "WARN" {
				t.Errorf("audit line %v, want level WARN with the cause", last)
			}
		})
	}
}
