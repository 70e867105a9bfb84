package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

func TestLeaseExpiryReapAndStaleComplete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		worker, reaper := e.store(), e.store()
		mustEnqueue(t, worker, "lease-api", 1)
		lost := mustClaim(t, worker, "lease-api", claimOpts).Claimed[0]

		e.clk.Advance(testLease - time.Millisecond)
		if ids, err := reaper.Reap(ctxT(t), "lease-api", 10); err != nil || len(ids) != 0 {
			t.Fatalf("reaped %v before expiry (%v)", ids, err)
		}
		e.clk.Advance(time.Millisecond)
		ids, err := reaper.Reap(ctxT(t), "lease-api", 10)
		if err != nil || len(ids) != 1 || ids[0] != lost.ID {
			t.Fatalf("reap = %v, %v", ids, err)
		}
		rec := mustGet(t, reaper, lost.ID)
		if rec.State != policy.Scheduled || rec.Attempts != 1 || len(rec.AttemptLog) != 1 {
			t.Fatalf("reaped record = %+v", rec)
		}
		want := policy.Attempt{N: 1, Kind: policy.KindFirst, StartedAt: t0, Duration: testLease, Outcome: policy.Retryable, Error: "lease_expired"}
		if rec.AttemptLog[0] != want {
			t.Fatalf("reaped attempt = %+v, want %+v", rec.AttemptLog[0], want)
		}

		// The lost worker comes back: its completion must change nothing.
		_, err = worker.Complete(ctxT(t), lost, success())
		wantErr(t, err, policy.ErrStaleLease)

		again := mustClaim(t, reaper, "lease-api", claimOpts).Claimed
		if len(again) != 1 || again[0].Attempt != 2 || again[0].Kind != policy.KindRetry {
			t.Fatalf("re-claim = %+v", again)
		}
		// Even now the old token is void while the new lease holds.
		_, err = worker.Complete(ctxT(t), lost, success())
		wantErr(t, err, policy.ErrStaleLease)
		if r := mustComplete(t, reaper, again[0], success()); r.State != policy.Succeeded || r.Attempts != 2 {
			t.Fatalf("completion = %+v", r)
		}
		// And once finished, a second completion by the new holder is stale too.
		_, err = reaper.Complete(ctxT(t), again[0], success())
		wantErr(t, err, policy.ErrStaleLease)
		if rec := mustGet(t, reaper, lost.ID); len(rec.AttemptLog) != 2 || rec.State != policy.Succeeded {
			t.Fatalf("final record = %+v", rec)
		}
	})
}

func TestInlineRetryKeepsLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		cl := mustBegin(t, s, req("inline-api", "k1", "{}"))
		e.clk.Advance(time.Second)
		c := failure(e.clk.Now().Add(time.Minute))
		c.Action, c.Lease = policy.ActionRetryInline, testLease
		r := mustComplete(t, s, cl, c)
		if r.State != policy.InFlight || r.Attempts != 2 || cl.Attempt != 2 || cl.Kind != policy.KindRetry ||
			!cl.LeaseExpiresAt.Equal(e.clk.Now().Add(testLease)) {
			t.Fatalf("inline retry = %+v, claimed %+v", r, cl)
		}
		e.clk.Advance(testLease - time.Second) // past the first lease, within the renewed one
		if ids, _ := s.Reap(ctxT(t), "inline-api", 10); len(ids) != 0 {
			t.Fatalf("reaped a renewed lease: %v", ids)
		}
		if r := mustComplete(t, s, cl, success()); r.State != policy.Succeeded || r.Attempts != 2 {
			t.Fatalf("final = %+v", r)
		}
		log := mustGet(t, s, cl.ID).AttemptLog
		if len(log) != 2 || log[0].Kind != policy.KindFirst || log[1].Kind != policy.KindRetry || log[1].N != 2 {
			t.Fatalf("attempt log = %+v", log)
		}
	})
}

func TestSyncFailureRecordedAsFailed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		cl := mustBegin(t, s, req("fail-api", "k1", "{}"))
		r := mustComplete(t, s, cl, policy.Completion{
			Action:   policy.ActionFail,
			Attempt:  &policy.Attempt{StartedAt: t0, Status: 400, Outcome: policy.Permanent, Error: "status_4xx"},
			Response: &policy.Response{Status: 400, Body: []byte("bad")},
		})
		if r.State != policy.Failed || r.Breaker.ConsecutiveFailures != 0 || r.Breaker.OutageBegan {
			t.Fatalf("result = %+v (a permanent answer never counts)", r)
		}
		if d := pttl(t, e, recordKey(cl.ID)); d <= day-time.Minute {
			t.Fatalf("failed TTL = %v, want the idempotency retention", d)
		}
		if page, _ := deadLettersOf(s).DeadLetters(ctxT(t), policy.DeadLetterQuery{Endpoint: "fail-api"}); len(page.Items) != 0 {
			t.Fatalf("a synchronous failure was dead-lettered: %+v", page.Items)
		}
	})
}

func TestInlineRetryRefusedWhenBreakerOpens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		br := policy.BreakerSettings{Failures: 1, ProbeInterval: time.Minute}
		res, err := s.Begin(ctxT(t), req("refuse-api", "k", "{}"), policy.BeginOptions{Lease: testLease, Breaker: br})
		if err != nil {
			t.Fatal(err)
		}
		c := failure(e.clk.Now().Add(5 * time.Second))
		c.Action, c.Lease, c.Breaker = policy.ActionRetryInline, testLease, br
		r := mustComplete(t, s, res.Claimed, c)
		if r.State != policy.Held || !r.Breaker.Opened || r.Attempts != 1 {
			t.Fatalf("inline retry into an opening breaker = %+v, want held", r)
		}
		if rec := mustGet(t, s, res.Claimed.ID); !rec.NextAttemptAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("held until %v, want the probe time", rec.NextAttemptAt)
		}
	})
}
