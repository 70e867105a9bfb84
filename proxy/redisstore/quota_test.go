package redisstore

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// These tests push past each Redis-bytes limit of contract §10 and show the
// others are still served: what a finished keyed write keeps, the backlog
// caps counting everything a record stores, and per-organisation shares.

// bigRequest is a keyed write from issuer with a header and a body of the
// given sizes.
func bigRequest(endpoint, issuer, key string, headerBytes, bodyBytes int) policy.NewCallout {
	return policy.NewCallout{
		Endpoint: endpoint, Issuer: issuer, Method: http.MethodPost, Path: "/v1/charges",
		Header: http.Header{"X-Big": {strings.Repeat("h", headerBytes)}, "Content-Type": {"application/json"}},
		Body:   []byte(strings.Repeat("b", bodyBytes)), IdempotencyKey: key,
	}
}

// A finished keyed write keeps what replay needs, not the request: with a
// 1 MB header or a 1 MB body, the record, its parts and its reservation
// hold under 4 KB (with a small response; the response cap bounds the
// rest), and nothing of it is charged to the backlog any more.
func TestFinishedKeyedWriteKeepsNoRequest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		for _, tc := range []struct {
			name         string
			header, body int
		}{{"1 MB header", 1 << 20, 0}, {"1 MB body", 0, 1 << 20}} {
			t.Run(tc.name, func(t *testing.T) {
				nc := bigRequest("fin-api", "https://a.my.salesforce.com", "k-"+tc.name, tc.header, tc.body)
				res, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
				if err != nil {
					t.Fatal(err)
				}
				if _, n, _ := s.Backlog(ctxT(t), "fin-api"); n < int64(tc.header+tc.body) {
					t.Fatalf("pending: %d backlog bytes, want at least the %d request bytes", n, tc.header+tc.body)
				}
				mustComplete(t, s, res.Claimed, success())
				if items, n, err := s.Backlog(ctxT(t), "fin-api"); items != 0 || n != 0 || err != nil {
					t.Fatalf("after success: %d items %d bytes (%v), want 0 0", items, n, err)
				}
				k := keyspace.HomeQueue("fin-api")
				keys := append(recordKeys(res.Claimed.ID), k.Reservation(nc.Issuer, nc.IdempotencyKey))
				var total int64
				for _, key := range keys {
					if e.b.Mini != nil {
						if e.b.Mini.Exists(key) {
							total += int64(len(key)) // miniredis has no MEMORY USAGE: count presence
						}
						continue
					}
					total += e.b.Client.MemoryUsage(ctxT(t), key, 0).Val()
				}
				t.Logf("%s: finished keyed write holds %d bytes in Redis (MEMORY USAGE of record, parts, reservation)", tc.name, total)
				if total >= 4096 {
					t.Fatalf("finished keyed write holds %d bytes, target < 4 KB", total)
				}
				// Idempotent replay still works from what is kept.
				again, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
				if err != nil || again.Existing == nil || again.Existing.Callout == nil ||
					again.Existing.Callout.State != policy.Succeeded || !again.Existing.SameRequest {
					t.Fatalf("replay of the finished write = %+v, %v", again, err)
				}
			})
		}
	})
}

// The byte cap counts headers and the attempt log, not only bodies: a
// request whose headers would pass max_backlog_bytes is refused before
// anything is stored, and a small one still fits.
func TestBacklogBytesCountHeadersAndAttempts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		base := recordBytes(t, s, "hdr-apx")
		lim := policy.BacklogLimits{MaxBytes: 64 << 10}
		_, err := s.Enqueue(ctxT(t), bigRequest("hdr-api", "https://a.my.salesforce.com", "", 70<<10, 0),
			policy.EnqueueOptions{Limits: lim})
		wantErr(t, err, policy.ErrBacklogFull)
		if items, n, _ := s.Backlog(ctxT(t), "hdr-api"); items != 0 || n != 0 {
			t.Fatalf("a refused callout left %d items %d bytes", items, n)
		}
		if e.b.Mini != nil && len(e.b.Mini.Keys()) == 0 {
			t.Fatal("no keys at all: the probe callout vanished")
		}
		id := mustEnqueueReq(t, s, req("hdr-api", "", ""))
		_, before, _ := s.Backlog(ctxT(t), "hdr-api")
		if before != base {
			t.Fatalf("a bodiless callout charged %d bytes here, %d on the probe endpoint", before, base)
		}
		c := mustClaim(t, s, "hdr-api", claimOpts).Claimed[0]
		if c.ID != id {
			t.Fatalf("claimed %s, want %s", c.ID, id)
		}
		mustComplete(t, s, c, failure(e.clk.Now().Add(time.Hour)))
		if _, after, _ := s.Backlog(ctxT(t), "hdr-api"); after <= before {
			t.Fatalf("a failed attempt's log and response added nothing: %d -> %d bytes", before, after)
		}
	})
}

// One organisation cannot fill an endpoint that others share: past its
// share it gets ErrIssuerBacklogFull (which is also ErrBacklogFull), and
// another organisation's callouts are still accepted; finishing one frees
// the share.
func TestPerIssuerShares(t *testing.T) {
	const a, b = "https://a.my.salesforce.com", "https://b.my.salesforce.com"
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		t.Run("items", func(t *testing.T) {
			lim := policy.BacklogLimits{MaxItems: 100, MaxItemsPerIssuer: 3}
			for i := range 3 {
				if _, err := s.Enqueue(ctxT(t), bigRequest("share-items", a, "", 10, 10), policy.EnqueueOptions{Limits: lim}); err != nil {
					t.Fatalf("org a callout %d: %v", i, err)
				}
			}
			_, err := s.Enqueue(ctxT(t), bigRequest("share-items", a, "", 10, 10), policy.EnqueueOptions{Limits: lim})
			wantErr(t, err, policy.ErrIssuerBacklogFull)
			wantErr(t, err, policy.ErrBacklogFull)
			_, err = s.Begin(ctxT(t), bigRequest("share-items", a, "k", 10, 10), policy.BeginOptions{Lease: testLease, Limits: lim})
			wantErr(t, err, policy.ErrIssuerBacklogFull)
			if _, err := s.Enqueue(ctxT(t), bigRequest("share-items", b, "", 10, 10), policy.EnqueueOptions{Limits: lim}); err != nil {
				t.Fatalf("org b refused while org a is at its share: %v", err)
			}
			c := mustClaim(t, s, "share-items", ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
			if c.Issuer != a {
				t.Fatalf("claimed org %s's callout first, want a's", c.Issuer)
			}
			mustComplete(t, s, c, success())
			if _, err := s.Enqueue(ctxT(t), bigRequest("share-items", a, "", 10, 10), policy.EnqueueOptions{Limits: lim}); err != nil {
				t.Fatalf("org a after one of its callouts finished: %v", err)
			}
		})
		t.Run("bytes", func(t *testing.T) {
			lim := policy.BacklogLimits{MaxBytes: 10 << 20, MaxBytesPerIssuer: 1 << 20}
			if _, err := s.Enqueue(ctxT(t), bigRequest("share-bytes", a, "", 0, 900<<10), policy.EnqueueOptions{Limits: lim}); err != nil {
				t.Fatal(err)
			}
			_, err := s.Enqueue(ctxT(t), bigRequest("share-bytes", a, "", 200<<10, 0), policy.EnqueueOptions{Limits: lim})
			wantErr(t, err, policy.ErrIssuerBacklogFull)
			if _, err := s.Enqueue(ctxT(t), bigRequest("share-bytes", b, "", 0, 900<<10), policy.EnqueueOptions{Limits: lim}); err != nil {
				t.Fatalf("org b refused while org a is at its byte share: %v", err)
			}
		})
	})
}

// A dead letter's bytes stay charged while Redis holds it and are released
// when it is discarded or its index entry is pruned after expiry.
func TestDeadLetterBytesReleased(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		dead := func(ep string) string {
			mustEnqueueReq(t, s, bigRequest(ep, "https://a.my.salesforce.com", "", 100, 1000))
			c := mustClaim(t, s, ep, claimOpts).Claimed[0]
			mustDeadLetter(t, s, c, policy.DeadLetterPermanent)
			return c.ID
		}
		id := dead("dlb-api")
		if items, n, _ := s.Backlog(ctxT(t), "dlb-api"); items != 0 || n < 1100 {
			t.Fatalf("dead letter: %d items %d bytes, want 0 items and its bytes still charged", items, n)
		}
		if err := s.Discard(ctxT(t), id); err != nil {
			t.Fatal(err)
		}
		if _, n, _ := s.Backlog(ctxT(t), "dlb-api"); n != 0 {
			t.Fatalf("discarded dead letter still charged: %d bytes", n)
		}
		dead("dlb-api")
		e.clk.Advance(31 * day)
		if n, err := s.PruneDeadLetters(ctxT(t), "dlb-api"); n != 1 || err != nil {
			t.Fatalf("prune = %d, %v", n, err)
		}
		if _, n, _ := s.Backlog(ctxT(t), "dlb-api"); n != 0 {
			t.Fatalf("expired dead letter still charged after the sweep: %d bytes", n)
		}
	})
}
