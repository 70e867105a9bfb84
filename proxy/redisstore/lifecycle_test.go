package redisstore

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

func TestBeginCompleteSucceededSetsTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		nc := req("payment-api", "key-1", `{"amount":100}`)
		res, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
		if err != nil {
			t.Fatal(err)
		}
		cl := res.Claimed
		if cl == nil || cl.Kind != policy.KindFirst || cl.Attempt != 1 || !cl.FirstAttemptAt.Equal(t0) {
			t.Fatalf("claimed = %+v, want first attempt 1 at t0", cl)
		}
		if !cl.LeaseExpiresAt.Equal(t0.Add(testLease)) || cl.IdempotencyKey != "key-1" {
			t.Fatalf("lease/key = %v %q", cl.LeaseExpiresAt, cl.IdempotencyKey)
		}
		k := keyspace.HomeQueue("payment-api")
		if d := pttl(t, e, recordKey(cl.ID)); d != -1 {
			t.Fatalf("pending callout TTL = %v, want none", d)
		}
		e.clk.Advance(time.Second)
		r := mustComplete(t, s, cl, success())
		if r.State != policy.Succeeded || r.Attempts != 1 {
			t.Fatalf("result = %+v", r)
		}
		// The record's TTL is set as it ends; the reservation's was set by
		// Begin to lease + retention, so it outlives the record by at most
		// what was left of the lease (contract §5: at least the retention).
		for key, most := range map[string]time.Duration{recordKey(cl.ID): day, k.Reservation(nc.Issuer, nc.IdempotencyKey): day + testLease} {
			if d := pttl(t, e, key); d <= day-time.Minute || d > most {
				t.Fatalf("%s TTL = %v, want ~24h", key, d)
			}
		}
		got := mustGet(t, s, cl.ID)
		wantLog := []policy.Attempt{{N: 1, Kind: policy.KindFirst, StartedAt: t0, Duration: 20 * time.Millisecond, Status: 201, Outcome: policy.Success}}
		if !reflect.DeepEqual(got.AttemptLog, wantLog) {
			t.Fatalf("attempt log = %+v, want %+v", got.AttemptLog, wantLog)
		}
		if got.State != policy.Succeeded || !got.FinishedAt.Equal(t0.Add(time.Second)) || got.Response == nil ||
			got.Response.Status != 201 || string(got.Response.Body) != `{"id":7}` || got.Response.Header.Get("X-Id") != "7" {
			t.Fatalf("record = %+v (response %+v)", got, got.Response)
		}
		// A finished callout keeps what replay and its status document
		// need, not the request (contract §5): its headers and body are gone.
		if len(got.Body) != 0 || len(got.Header) != 0 ||
			got.Query != "a=1" || got.SourceRecord != "001000000000001AAA" {
			t.Fatalf("request fields = %+v", got)
		}
		// Its fingerprint is kept with its reservation: the same request is
		// replayed, another one under the same key is not.
		for body, same := range map[string]bool{string(nc.Body): true, "other": false} {
			again := nc
			again.Body = []byte(body)
			r, err := s.Begin(ctxT(t), again, policy.BeginOptions{Lease: testLease})
			if err != nil || r.Existing == nil || r.Existing.ID != cl.ID || r.Existing.SameRequest != same {
				t.Fatalf("same key, body %q: %+v, %v; want the finished callout, same request %v", body, r.Existing, err, same)
			}
		}
		if e.b.Mini != nil && e.b.Mini.Exists(recordKeys(cl.ID)[1]) {
			t.Fatal("the finished callout's body key is still there")
		}
		if items, bytes, err := s.Backlog(ctxT(t), "payment-api"); err != nil || items != 0 || bytes != 0 {
			t.Fatalf("backlog = %d items %d bytes %v, want 0 0", items, bytes, err)
		}
		if e.b.Mini != nil {
			e.b.Mini.FastForward(day + time.Second)
			_, err := s.Get(ctxT(t), cl.ID)
			wantErr(t, err, policy.ErrNotFound)
			e.b.Mini.FastForward(testLease)
			if e.b.Mini.Exists(k.Reservation(nc.Issuer, nc.IdempotencyKey)) {
				t.Fatal("idempotency key outlived its TTL")
			}
		}
	})
}

func TestResponseBodyCapped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store() // cap 16 bytes
		cl := mustBegin(t, s, req("cap-api", "k", "x"))
		c := success()
		c.Response.Body = []byte("0123456789abcdefTAIL")
		mustComplete(t, s, cl, c)
		got := mustGet(t, s, cl.ID).Response
		if string(got.Body) != "0123456789abcdef" || !got.Truncated {
			t.Fatalf("response = %q truncated=%v", got.Body, got.Truncated)
		}
	})
}

func TestEnqueueThenClaimRespectsDueTime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		r, err := s.Enqueue(ctxT(t), req("due-api", "", "{}"), policy.EnqueueOptions{DueAt: t0.Add(10 * time.Second)})
		if err != nil || r.State != policy.Scheduled || !r.DueAt.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("enqueue = %+v, %v", r, err)
		}
		if got := mustClaim(t, s, "due-api", claimOpts); len(got.Claimed) != 0 {
			t.Fatalf("claimed %d before due", len(got.Claimed))
		}
		if c := mustGet(t, s, r.ID); c.State != policy.Scheduled || c.Attempts != 0 || !c.NextAttemptAt.Equal(r.DueAt) {
			t.Fatalf("scheduled record = %+v", c)
		}
		e.clk.Advance(10 * time.Second)
		got := mustClaim(t, s, "due-api", claimOpts)
		if len(got.Claimed) != 1 {
			t.Fatalf("claimed %d at due time", len(got.Claimed))
		}
		c := got.Claimed[0]
		if c.ID != r.ID || c.Kind != policy.KindFirst || c.Attempt != 1 || !c.FirstAttemptAt.Equal(e.clk.Now()) ||
			!c.DueAt.Equal(r.DueAt) || !c.StartedAt.Equal(e.clk.Now()) ||
			c.Method != http.MethodPost || c.Path != "/v1/charges" || string(c.Body) != "{}" {
			t.Fatalf("claimed = %+v", c)
		}
		if rec := mustGet(t, s, r.ID); rec.State != policy.InFlight || rec.Attempts != 1 || !rec.LeaseExpiresAt.Equal(e.clk.Now().Add(testLease)) {
			t.Fatalf("in-flight record = %+v", rec)
		}
	})
}

func TestClaimNeverReturnsMoreThanBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		mustEnqueue(t, s, "batch-api", 25)
		seen := map[string]bool{}
		for i, want := range []int{10, 10, 5, 0} {
			got := mustClaim(t, s, "batch-api", ClaimOptions{Batch: 10, Lease: testLease})
			if len(got.Claimed) != want {
				t.Fatalf("round %d: claimed %d, want %d", i, len(got.Claimed), want)
			}
			for _, c := range got.Claimed {
				if seen[c.ID] {
					t.Fatalf("round %d: %s claimed twice", i, c.ID)
				}
				seen[c.ID] = true
			}
		}
	})
}

func TestRetryReschedulesAndCountsAttemptsAtClaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		mustEnqueue(t, s, "retry-api", 1)
		c := mustClaim(t, s, "retry-api", claimOpts).Claimed[0]
		next := e.clk.Now().Add(5 * time.Second)
		r := mustComplete(t, s, c, failure(next))
		if r.State != policy.Scheduled || r.Attempts != 1 {
			t.Fatalf("result = %+v", r)
		}
		rec := mustGet(t, s, c.ID)
		if !rec.NextAttemptAt.Equal(next) || rec.LastError != "status_5xx" || rec.Response.Status != 503 || len(rec.AttemptLog) != 1 {
			t.Fatalf("record = %+v", rec)
		}
		if got := mustClaim(t, s, "retry-api", claimOpts); len(got.Claimed) != 0 {
			t.Fatal("claimed before the retry was due")
		}
		e.clk.Advance(5 * time.Second)
		c2 := mustClaim(t, s, "retry-api", claimOpts).Claimed[0]
		if c2.ID != c.ID || c2.Attempt != 2 || c2.Kind != policy.KindRetry || !c2.FirstAttemptAt.Equal(t0) {
			t.Fatalf("second claim = %+v", c2)
		}
		if rec := mustGet(t, s, c.ID); rec.Attempts != 2 || !rec.NextAttemptAt.IsZero() {
			t.Fatalf("attempts at claim = %d, next = %v", rec.Attempts, rec.NextAttemptAt)
		}
	})
}

func TestDeadLetterIndexedWithTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		nc := req("dl-api", "dl-key", "{}")
		r, err := s.Enqueue(ctxT(t), nc, enqOpts)
		if err != nil {
			t.Fatal(err)
		}
		c := mustClaim(t, s, "dl-api", claimOpts).Claimed[0]
		res := mustDeadLetter(t, s, c, policy.DeadLetterExhausted)
		if res.State != policy.DeadLettered || !res.NotifyOwner {
			t.Fatalf("result = %+v, want dead_lettered and notify (first dead letter of the outage)", res)
		}
		k := keyspace.HomeQueue("dl-api")
		for _, key := range []string{recordKey(r.ID), k.Reservation(nc.Issuer, nc.IdempotencyKey)} {
			if d := pttl(t, e, key); d <= 30*day-time.Minute || d > 30*day {
				t.Fatalf("%s TTL = %v, want ~720h", key, d)
			}
		}
		page, err := deadLettersOf(s).DeadLetters(ctxT(t), policy.DeadLetterQuery{Endpoint: "dl-api"})
		if err != nil || len(page.Items) != 1 || page.Next != "" {
			t.Fatalf("dead letters = %+v, %v", page, err)
		}
		dl := page.Items[0]
		if dl.ID != r.ID || dl.Reason != policy.DeadLetterExhausted || dl.Status != 503 || !dl.DeadLetteredAt.Equal(t0) || dl.Attempts != 1 {
			t.Fatalf("dead letter = %+v", dl)
		}
		if rec := mustGet(t, s, r.ID); rec.DeadLetterReason != policy.DeadLetterExhausted || rec.State != policy.DeadLettered {
			t.Fatalf("record = %+v", rec)
		}
		// A second dead letter in the same outage does not notify again.
		mustEnqueue(t, s, "dl-api", 1)
		c2 := mustClaim(t, s, "dl-api", claimOpts).Claimed[0]
		if res := mustDeadLetter(t, s, c2, policy.DeadLetterExhausted); res.NotifyOwner {
			t.Fatal("owner notified twice in one outage")
		}
	})
}

func TestNotDispatchedCompletionUndoesCount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		mustEnqueue(t, s, "nd-api", 1)
		c := mustClaim(t, s, "nd-api", claimOpts).Claimed[0]
		res := mustComplete(t, s, c, policy.Completion{Action: policy.ActionDeadLetter, Reason: policy.DeadLetterExhausted})
		if res.State != policy.DeadLettered || res.Attempts != 0 || res.Breaker.ConsecutiveFailures != 0 {
			t.Fatalf("result = %+v", res)
		}
		if rec := mustGet(t, s, c.ID); len(rec.AttemptLog) != 0 {
			t.Fatalf("attempt log = %+v, want empty", rec.AttemptLog)
		}
	})
}

// TestResponseBodyCappedOnCharacterBoundary: a text body cut to the cap
// stays valid UTF-8 (contract §5): "€" is three bytes, so 16 bytes of them end
// after five whole characters, 15 bytes; a binary body is cut at the cap.
func TestResponseBodyCappedOnCharacterBoundary(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store() // cap 16 bytes
		for _, tt := range []struct{ name, body, want string }{
			{"euro signs", strings.Repeat("€", 100), strings.Repeat("€", 5)},
			{"four-byte characters", "ab" + strings.Repeat("😀", 10), "ab" + strings.Repeat("😀", 3)},
			{"ASCII", strings.Repeat("a", 40), strings.Repeat("a", 16)},
			{"boundary exactly at the cap", "0123456789abcde€€", "0123456789abcde"},
			{"binary", strings.Repeat("\x80", 40), strings.Repeat("\x80", 16)},
		} {
			cl := mustBegin(t, s, req("cap-api", "k-"+tt.name, "x"))
			c := success()
			c.Response.Body = []byte(tt.body)
			mustComplete(t, s, cl, c)
			got := mustGet(t, s, cl.ID).Response
			if string(got.Body) != tt.want || !got.Truncated {
				t.Errorf("%s: stored %q truncated=%v; want %q", tt.name, got.Body, got.Truncated, tt.want)
			}
		}
	})
}

// Begin's reservation is born with lease + retention as its TTL (so a
// first attempt that ends in time needs no other write to it); a callout
// that stays pending — its first attempt failed, or its worker vanished and
// it was reaped — keeps its reservation for as long as it lives.
func TestBeginReservationTTLWhilePending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		k := keyspace.HomeQueue("ttl-api")
		r1 := mustBegin(t, s, req("ttl-api", "retried", "{}"))
		if d := pttl(t, e, k.Reservation(r1.Issuer, "retried")); d <= day || d > day+testLease {
			t.Fatalf("Begin's reservation TTL = %v, want lease + retention", d)
		}
		mustComplete(t, s, r1, failure(e.clk.Now().Add(time.Hour)))
		if d := pttl(t, e, k.Reservation(r1.Issuer, "retried")); d != -1 {
			t.Fatalf("after a failed first attempt: reservation TTL %v, want none while pending", d)
		}
		r2 := mustBegin(t, s, req("ttl-api", "reaped", "{}"))
		e.clk.Advance(testLease + time.Second)
		if ids, err := s.Reap(ctxT(t), "ttl-api", 10); err != nil || len(ids) != 1 || ids[0] != r2.ID {
			t.Fatalf("reap = %v, %v", ids, err)
		}
		if d := pttl(t, e, k.Reservation(r2.Issuer, "reaped")); d != -1 {
			t.Fatalf("after a reap: reservation TTL %v, want none while pending", d)
		}
		// Finished later by a dispatcher, each gets the retention from then.
		e.clk.Advance(time.Hour)
		c := mustClaim(t, s, "ttl-api", claimOpts).Claimed
		if len(c) != 2 {
			t.Fatalf("claimed %d, want both", len(c))
		}
		for _, cl := range c {
			mustComplete(t, s, cl, success())
		}
		for _, key := range []string{"retried", "reaped"} {
			if d := pttl(t, e, k.Reservation(r1.Issuer, key)); d <= day-time.Minute || d > day {
				t.Fatalf("%s after success: reservation TTL %v, want the retention", key, d)
			}
		}
	})
}
