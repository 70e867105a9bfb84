package redisstore

import (
	"testing"
	"time"

	pend "github.com/calloutproxy/callout-proxy/proxy/redisstore/pending"

	"github.com/calloutproxy/callout-proxy/policy"
)

func TestPending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ids := mustEnqueue(t, s, "pay-api", 5)
		mustEnqueue(t, s, "crm-api", 1)
		page := func(state policy.State, offset, limit int) ([]string, int) {
			t.Helper()
			cs, next, err := pendingOf(s).Pending(ctxT(t), "pay-api", state, offset, limit)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]string, len(cs))
			for i, c := range cs {
				if c.State != state || c.Endpoint != "pay-api" || c.Method != "POST" || c.Body != nil {
					t.Fatalf("%+v: want a %s summary of pay-api without its body", c, state)
				}
				out[i] = c.ID
			}
			return out, next
		}
		got, next := page(policy.Scheduled, 0, 3)
		if len(got) != 3 || next != 3 {
			t.Fatalf("first page %v next %d, want 3 ids and 3", got, next)
		}
		rest, next := page(policy.Scheduled, 3, 3)
		if len(rest) != 2 || next != 0 {
			t.Fatalf("second page %v next %d, want 2 ids and 0", rest, next)
		}
		seen := map[string]bool{}
		for _, id := range append(got, rest...) {
			seen[id] = true
		}
		for _, id := range ids {
			if !seen[id] {
				t.Fatalf("%s not listed", id)
			}
		}
		if cs, _, _ := pendingOf(s).Pending(ctxT(t), "pay-api", policy.Scheduled, 0, 1); len(cs) != 1 || !cs[0].NextAttemptAt.Equal(t0) {
			t.Fatalf("a scheduled callout's due time = %+v, want %v (the due set's score)", cs, t0)
		}
		if held, _ := page(policy.Held, 0, 10); len(held) != 0 {
			t.Fatalf("held while the gate is open: %v", held)
		}

		// Claimed: in flight; an open breaker holds the rest.
		cl := mustClaim(t, s, "pay-api", ClaimOptions{Batch: 2, Lease: testLease})
		if flying, _ := page(policy.InFlight, 0, 10); len(flying) != 2 {
			t.Fatalf("in flight %v, want 2", flying)
		}
		if cs, _, _ := pendingOf(s).Pending(ctxT(t), "pay-api", policy.InFlight, 0, 1); len(cs) != 1 || !cs[0].LeaseExpiresAt.Equal(t0.Add(testLease)) {
			t.Fatalf("an in-flight callout's lease = %+v, want %v", cs, t0.Add(testLease))
		}
		for _, c := range cl.Claimed {
			mustComplete(t, s, c, failure(e.clk.Now().Add(time.Hour)))
		}
		openBreaker(t, e, s, "pay-api", 18) // 2 failures above, 20 open it
		if sched, _ := page(policy.Scheduled, 0, 100); len(sched) != 0 {
			t.Fatalf("scheduled behind an open breaker: %v", sched)
		}
		if held, _ := page(policy.Held, 0, 100); len(held) != 23 {
			t.Fatalf("held %d, want 23", len(held))
		}

		for _, bad := range []struct {
			state         policy.State
			offset, limit int
		}{{policy.Succeeded, 0, 10}, {policy.Held, 0, 0}, {policy.Held, 0, pend.MaxPage + 1}, {policy.Held, -1, 10}} {
			if _, _, err := pendingOf(s).Pending(ctxT(t), "pay-api", bad.state, bad.offset, bad.limit); err == nil {
				t.Errorf("Pending(%s, %d, %d): no error", bad.state, bad.offset, bad.limit)
			}
		}
		// an unknown state is an error on an endpoint with no queues too
		if _, _, err := pendingOf(s).Pending(ctxT(t), "idle-api", policy.Succeeded, 0, 10); err == nil {
			t.Error("Pending(succeeded) of an endpoint with no callouts: no error")
		}
	})
}

func TestKeyHolder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		r, err := s.Enqueue(ctxT(t), req("pay-api", "k-1", "{}"), enqOpts)
		if err != nil {
			t.Fatal(err)
		}
		id, err := inspectOf(s).KeyHolder(ctxT(t), "https://org.my.salesforce.com", "pay-api", "k-1")
		if err != nil || id != r.ID {
			t.Fatalf("KeyHolder = %q, %v; want %s", id, err, r.ID)
		}
		for _, tt := range []struct{ issuer, endpoint, key string }{
			{"https://other.my.salesforce.com", "pay-api", "k-1"}, // another organisation's scope
			{"https://org.my.salesforce.com", "crm-api", "k-1"},   // another endpoint
			{"https://org.my.salesforce.com", "pay-api", "k-2"},
			{"https://org.my.salesforce.com", "pay-api", ""},
		} {
			_, err := inspectOf(s).KeyHolder(ctxT(t), tt.issuer, tt.endpoint, tt.key)
			wantErr(t, err, policy.ErrNotFound)
		}
	})
}
