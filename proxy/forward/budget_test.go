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
// limit.ErrOverloaded, classified retryable — nothing is buffered.
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
	if c := policy.Classify(0, a.Err); c.Outcome != policy.Retryable {
		t.Errorf("classified %+v, want retryable", c)
	}
}
