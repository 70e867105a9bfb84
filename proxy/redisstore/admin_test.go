package redisstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

func TestDisableDeadLettersPending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		pending := mustEnqueue(t, s, "off-api", 250) // more than one drain batch
		keyed, _ := s.Enqueue(ctxT(t), req("off-api", "kk", "{}"), policy.EnqueueOptions{DueAt: t0.Add(time.Hour)})
		pending = append(pending, keyed.ID)
		inflight := mustClaim(t, s, "off-api", ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
		pending = slices.DeleteFunc(pending, func(id string) bool { return id == inflight.ID })

		e.clk.Advance(time.Second)
		res, err := s.Disable(ctxT(t), "off-api", "no success for 72h")
		if err != nil || !res.Newly {
			t.Fatalf("disable = %+v, %v", res, err)
		}
		slices.Sort(pending)
		got := slices.Sorted(slices.Values(res.DeadLettered))
		if !slices.Equal(got, pending) {
			t.Fatalf("dead-lettered %d, want the %d pending", len(got), len(pending))
		}
		rec := mustGet(t, s, keyed.ID)
		if rec.State != policy.DeadLettered || rec.DeadLetterReason != policy.DeadLetterEndpointDisabled {
			t.Fatalf("record = %+v", rec)
		}
		k := keyspace.HomeQueue("off-api")
		if d := pttl(t, e, k.Reservation(rec.Issuer, "kk")); d <= 29*day {
			t.Fatalf("reservation TTL = %v, want the dead-letter retention", d)
		}
		st := mustState(t, s, "off-api")
		if !st.Disabled || st.DisabledReason != "no success for 72h" || !st.DisabledAt.Equal(t0.Add(time.Second)) ||
			st.Due != 0 || st.Leased != 1 || st.DeadLetters != int64(len(pending)) || st.Gate.State != policy.GateDisabled {
			t.Fatalf("state = %+v", st)
		}
		if again, _ := s.Disable(ctxT(t), "off-api", "other"); again.Newly {
			t.Fatal("second disable reported newly")
		}
		_, err = s.Begin(ctxT(t), req("off-api", "", "{}"), policy.BeginOptions{Lease: testLease})
		wantErr(t, err, policy.ErrDisabled)
		_, err = s.Enqueue(ctxT(t), req("off-api", "", "{}"), enqOpts)
		wantErr(t, err, policy.ErrDisabled)

		// The in-flight attempt fails retryably: it becomes a dead letter.
		if r := mustComplete(t, s, inflight, failure(e.clk.Now())); r.State != policy.DeadLettered {
			t.Fatalf("retry on a disabled endpoint = %+v", r)
		}
		if rec := mustGet(t, s, inflight.ID); rec.DeadLetterReason != policy.DeadLetterEndpointDisabled {
			t.Fatalf("reason = %q", rec.DeadLetterReason)
		}

		if err := s.Enable(ctxT(t), "off-api"); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Begin(ctxT(t), req("off-api", "", "{}"), policy.BeginOptions{Lease: testLease}); err != nil || r.Claimed == nil {
			t.Fatalf("begin after enable = %+v, %v", r, err)
		}
	})
}

func TestReapedCalloutOfDisabledEndpointIsDrainedByClaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		mustEnqueue(t, s, "off2-api", 1)
		c := mustClaim(t, s, "off2-api", claimOpts).Claimed[0]
		if _, err := s.Disable(ctxT(t), "off2-api", "admin"); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(testLease)
		if ids, _ := s.Reap(ctxT(t), "off2-api", 10); len(ids) != 1 {
			t.Fatalf("reaped %v", ids)
		}
		got := mustClaim(t, s, "off2-api", claimOpts)
		if got.Gate.State != policy.GateDisabled || len(got.Claimed) != 0 || !slices.Equal(got.DeadLettered, []string{c.ID}) {
			t.Fatalf("claim = %+v", got)
		}
	})
}

func TestResetBreaker(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		openBreaker(t, e, s, "rst-api", 20)
		if err := s.ResetBreaker(ctxT(t), "rst-api"); err != nil {
			t.Fatal(err)
		}
		st := mustState(t, s, "rst-api")
		if st.Breaker != policy.BreakerClosed || st.ConsecutiveFailures != 0 || !st.OpenedAt.IsZero() || st.Gate.State != policy.GateOpen {
			t.Fatalf("state after reset = %+v", st)
		}
	})
}

// TestResetAndEnableReleaseHeld: callouts held behind an open breaker are
// due at the probe time; a reset (or an enable) makes them due now, while a
// callout waiting for its backoff keeps its due time.
func TestResetAndEnableReleaseHeld(t *testing.T) {
	for _, action := range []string{"reset", "enable"} {
		t.Run(action, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, e *env) {
				s := e.store()
				ep := "held-" + action
				// 20 failures reschedule 20 callouts an hour out (scheduled,
				// backoff) and open the breaker.
				last := openBreaker(t, e, s, ep, 20)
				if last.State != policy.Held {
					t.Fatalf("the failure that opened the breaker left its callout %s, want held", last.State)
				}
				held := mustEnqueue(t, s, ep, 3)
				for _, id := range held {
					if c := mustGet(t, s, id); c.State != policy.Held {
						t.Fatalf("enqueued behind an open breaker: state %s, want held", c.State)
					}
				}
				var err error
				if action == "reset" {
					err = s.ResetBreaker(ctxT(t), ep)
				} else {
					err = s.Enable(ctxT(t), ep)
				}
				if err != nil {
					t.Fatal(err)
				}
				got := mustClaim(t, s, ep, ClaimOptions{Batch: 100, Lease: testLease})
				// The three enqueued while open (held until the probe time);
				// the one whose failure opened the breaker and the 19 before
				// it, held too, keep their backoff (an hour: later than the
				// reopening).
				if n := len(got.Claimed); n != len(held) {
					t.Fatalf("claimed after %s: %d, want the %d held until the reopening (backoff ones keep their time)", action, n, len(held))
				}
				for _, id := range held {
					if !slices.ContainsFunc(got.Claimed, func(c *policy.Claimed) bool { return c.ID == id }) {
						t.Errorf("held callout %s not released by %s", id, action)
					}
				}
			})
		})
	}
}

func TestDeadLettersPagination(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		var want []string
		for i := range 7 {
			mustEnqueue(t, s, "page-api", 3)
			cl := mustClaim(t, s, "page-api", claimOpts).Claimed
			for _, c := range cl {
				mustDeadLetter(t, s, c, policy.DeadLetterExhausted)
			}
			ids := []string{cl[0].ID, cl[1].ID, cl[2].ID} // same ms: ordered by id
			slices.Sort(ids)
			if i >= 2 && i <= 5 {
				want = append(want, ids...)
			}
			e.clk.Advance(time.Second)
		}
		q := policy.DeadLetterQuery{Endpoint: "page-api", Since: t0.Add(2 * time.Second), Until: t0.Add(5 * time.Second), Limit: 5}
		var got []string
		for pages := 0; ; pages++ {
			page, err := deadLettersOf(s).DeadLetters(ctxT(t), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Items {
				got = append(got, d.ID)
			}
			if page.Next == "" {
				break
			}
			if pages == 0 { // discarding the cursor's entry must not skip or repeat
				if err := s.Discard(ctxT(t), page.Items[len(page.Items)-1].ID); err != nil {
					t.Fatal(err)
				}
				got = got[:len(got)-1]
				want = slices.Delete(want, 4, 5)
			}
			q.Cursor = page.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pages = %v\nwant    %v", got, want)
		}
	})
}

func TestDiscard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		nc := req("disc-api", "key", "{}")
		r, _ := s.Enqueue(ctxT(t), nc, enqOpts)
		wantErr(t, s.Discard(ctxT(t), r.ID), policy.ErrNotDeadLettered)
		c := mustClaim(t, s, "disc-api", claimOpts).Claimed[0]
		mustDeadLetter(t, s, c, policy.DeadLetterAmbiguous)
		if err := s.Discard(ctxT(t), r.ID); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctxT(t), r.ID)
		wantErr(t, err, policy.ErrNotFound)
		wantErr(t, s.Discard(ctxT(t), r.ID), policy.ErrNotFound)
		k := keyspace.HomeQueue("disc-api")
		if n := e.b.Client.Exists(ctxT(t), k.Reservation(nc.Issuer, "key")).Val(); n != 0 {
			t.Fatal("reservation outlived the discarded dead letter")
		}
		if n := e.b.Client.ZCard(ctxT(t), k.DL).Val(); n != 0 {
			t.Fatalf("index still holds %d entries", n)
		}
	})
}

func TestEndpointsRemembered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		for i := range 3 {
			mustEnqueue(t, s, fmt.Sprintf("seen-%d", i), 2)
		}
		got, err := s.Endpoints(ctxT(t))
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"seen-0", "seen-1", "seen-2"}) {
			t.Fatalf("endpoints = %v, %v", got, err)
		}
	})
}
