package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// TestOverloadedAnswerLeavesTheBreaker: an upstream answer the proxy
// cannot buffer because its own memory budget is full (here another
// organisation's 16 MiB less 8 KiB) is the proxy's limit, not the
// upstream's failure (reason overloaded): a read is answered 503
// overloaded, outcome retryable; a write is scheduled for a retry with
// last error overloaded; and neither counts toward the breaker, so writes
// past breaker_failures (2 here) are still scheduled, not held, and the
// caller's partition stays closed (contract §6, §10).
func TestOverloadedAnswerLeavesTheBreaker(t *testing.T) {
	const mib = 1 << 20
	budget := limit.NewBudget(16*mib, 20*time.Millisecond, 0)
	rig := &clockRig{}
	rig.build(t, rigSpec{
		upstream: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			rig.hits.Add(1)
			_, _ = io.WriteString(w, strings.Repeat("x", mib))
		},
		extra:   "    breaker_failures: 2\n",
		issuers: []string{shareRigIssuer},
		budget:  budget,
	})
	full := budget.Holder() // the other organisation's stalled bytes: the budget less 8 KiB
	full.Assign(shareRigIssuer)
	if err := full.Acquire(context.Background(), 16*mib-8<<10); err != nil {
		t.Fatal(err)
	}
	defer full.Release()

	read := rig.do(t, http.MethodGet, "/callout/api/v1/r", nil, "")
	var doc struct{ Type string }
	_ = json.Unmarshal(read.Body.Bytes(), &doc)
	if read.Code != http.StatusServiceUnavailable || doc.Type != "urn:callout-proxy:problem:overloaded" ||
		read.Header().Get("Callout-Outcome") != "retryable" || read.Header().Get("Retry-After") != "1" {
		t.Errorf("read whose answer does not fit: %d %s outcome %q Retry-After %q; want 503 overloaded, retryable, 1",
			read.Code, doc.Type, read.Header().Get("Callout-Outcome"), read.Header().Get("Retry-After"))
	}
	for i := range 4 {
		rec := rig.do(t, http.MethodPut, "/callout/api/v1/w", http.Header{"Idempotency-Key": {"w-" + strconv.Itoa(i)}}, `{}`)
		id := rec.Header().Get("Callout-Id")
		c, err := rig.store.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("write %d: %d %s: %v", i, rec.Code, rec.Body, err)
		}
		if rec.Code != http.StatusAccepted || c.State != policy.Scheduled || c.LastError != policy.ReasonOverloaded {
			t.Errorf("write %d whose answer does not fit: %d, state %s, last error %q; want 202 scheduled, overloaded",
				i, rec.Code, c.State, c.LastError)
		}
	}
	if n := rig.hits.Load(); n != 5 {
		t.Errorf("upstream hits %d, want 5 (every attempt was sent)", n)
	}
	gates, _ := rig.store.ReadGates(context.Background(), []string{"api", keyspace.PartitionGate("api", clockRigIssuer)})
	for _, g := range gates {
		if g.ConsecutiveFailures != 0 || g.Gate.Shut() {
			t.Errorf("the breaker was told of the proxy's own overload: %+v", g)
		}
	}
}
