package forward

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
)

// TestDoResponseInBudget: a buffered response is reserved in the memory
// budget (contract §10 "a budget of request and response bytes"): in the
// holder of the attempt's context, which keeps it after Do returns (the
// ingress releases it once the answer is written), or else only while Do
// runs. A response the budget has no room for fails the attempt with
// limit.ErrOverloaded and policy.ErrOverloaded, classified retryable
// "overloaded", which the breaker is not told of — nothing is buffered.
func TestDoResponseInBudget(t *testing.T) {
	const size = 1 << 20
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", size))
	})
	budget := limit.NewBudget(24<<20, 10*time.Millisecond, 0)
	f := newForwarder(t, Options{Budget: budget})
	ep := newEndpoint(t, "budget", srv.URL)

	h := budget.Holder()
	a := f.Do(limit.WithHolder(context.Background(), h), ep, get("/"))
	if a.Err != nil || len(a.Response.Body) != size {
		t.Fatalf("attempt = %v", a.Err)
	}
	if h.Held() != size || budget.InUse() != size {
		t.Errorf("holder %d, budget %d; want the response's %d bytes held", h.Held(), budget.InUse(), size)
	}
	h.Release()
	if a = do(f, ep, get("/")); a.Err != nil || budget.InUse() != 0 {
		t.Errorf("without a holder: err %v, %d bytes still held after Do", a.Err, budget.InUse())
	}

	full := budget.Holder()
	if err := full.Acquire(context.Background(), 23<<20+512<<10); err != nil {
		t.Fatal(err)
	}
	defer full.Release()
	a = do(f, ep, get("/"))
	if !errors.Is(a.Err, limit.ErrOverloaded) || a.Response != nil || !a.Sent {
		t.Fatalf("attempt past the budget = %+v, want ErrOverloaded, no response, sent", a)
	}
	if c := policy.Classify(0, a.Err); c != (policy.Classification{Outcome: policy.Retryable, Reason: policy.ReasonOverloaded}) ||
		policy.CountsTowardBreaker(c) {
		t.Errorf("classified %+v, want retryable overloaded, not counted toward the breaker (the proxy's own limit)", c)
	}
}

// TestDoDispatchedResponseCountsTowardIssuer: an attempt whose context
// carries no holder (the dispatcher's) buffers its response in a holder
// assigned to the Request's Issuer, so the bytes count toward that
// organisation's share of the budget like its requests' bytes (contract
// §10): once the budget is under pressure, an organisation at its share
// cannot buffer more, and another organisation still can. The refusal is
// the proxy's own limit: Retryable "overloaded", never the breaker's.
func TestDoDispatchedResponseCountsTowardIssuer(t *testing.T) {
	const size = 1 << 20
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", size))
	})
	// 24 MiB, under pressure past 12 MiB, 12 MiB per organisation
	budget := limit.NewBudget(24<<20, 10*time.Millisecond, 12<<20)
	f := newForwarder(t, Options{Budget: budget})
	ep := newEndpoint(t, "share", srv.URL)

	orgA := budget.Holder() // org-a's requests hold its share: half the budget
	orgA.Assign("org-a")
	if err := orgA.Acquire(context.Background(), 12<<20); err != nil {
		t.Fatal(err)
	}
	defer orgA.Release()

	reqA := get("/")
	reqA.Issuer = "org-a"
	a := do(f, ep, reqA)
	if !errors.Is(a.Err, limit.ErrShareExceeded) || !errors.Is(a.Err, policy.ErrOverloaded) || a.Response != nil || !a.Sent {
		t.Fatalf("org-a's dispatched attempt past its share = %+v, want ErrShareExceeded and policy.ErrOverloaded, "+
			"no response, sent", a)
	}
	if c := a.Classify(); c != (policy.Classification{Outcome: policy.Retryable, Reason: policy.ReasonOverloaded}) ||
		policy.CountsTowardBreaker(c) {
		t.Errorf("classified %+v (counts toward the breaker: %v), want retryable overloaded, not counted",
			c, policy.CountsTowardBreaker(c))
	}
	if got := budget.OrgInUse("org-a"); got != 12<<20 {
		t.Errorf("org-a holds %d after its refused attempt, want its requests' %d", got, 12<<20)
	}

	reqB := get("/")
	reqB.Issuer = "org-b"
	if a = do(f, ep, reqB); a.Err != nil || len(a.Response.Body) != size {
		t.Fatalf("org-b's dispatched attempt while org-a holds its share: %v", a.Err)
	}
	if budget.OrgInUse("org-b") != 0 || budget.InUse() != 12<<20 {
		t.Errorf("after org-b's attempt: org-b holds %d, the budget %d; want 0 and org-a's %d",
			budget.OrgInUse("org-b"), budget.InUse(), 12<<20)
	}
}
