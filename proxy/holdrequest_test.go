package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

type traceKey struct{}

// TestHoldRequestBuildsOnTheIngressContext: holdRequest derives the
// request's holder from the context the ingress made (its trace), so the
// ingress copies the request once with both; refused, it hands that
// context back as it is, with the overloaded problem.
func TestHoldRequestBuildsOnTheIngressContext(t *testing.T) {
	cfg := &config.Config{}
	cfg.Limits.OverloadWait = time.Millisecond
	s := &Server{d: Deps{Config: cfg, Budget: limit.NewBudget(1<<20, time.Millisecond, 0)}}
	r := httptest.NewRequest(http.MethodGet, "/callout/api/x", nil)
	base := context.WithValue(r.Context(), traceKey{}, "trace")
	ctx, release, err := s.holdRequest(base, r)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Value(traceKey{}) != "trace" || limit.HolderFrom(ctx) == nil || limit.HolderFrom(ctx).Held() == 0 {
		t.Fatalf("held context: trace %v, holder %v", ctx.Value(traceKey{}), limit.HolderFrom(ctx))
	}
	release()

	s.d.Budget = limit.NewBudget(1, time.Millisecond, 0) // no room for any header
	if err := s.d.Budget.Holder().Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	ctx, release, err = s.holdRequest(base, r)
	defer release()
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.Overloaded || ctx != base {
		t.Fatalf("refused: %v, context kept %v; want overloaded and the ingress's context", err, ctx == base)
	}
}
