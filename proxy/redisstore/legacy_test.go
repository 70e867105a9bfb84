package redisstore

import (
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

// Records written by the layout before layout 2 (a rolling upgrade: old
// replicas keep writing them while new ones start) stay readable,
// claimable, completable, reapable, drainable, discardable and accounted.
// legacyEnqueue writes one exactly as the previous version's Enqueue did,
// with its own script (lua/legacy_enqueue.lua).

func legacyScript(t *testing.T, name string) *redis.Script {
	t.Helper()
	lib, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	return redis.NewScript(string(lib) + "\n" + string(body))
}

// legacyEnqueue creates a scheduled callout in the legacy layout, due now,
// and returns its id.
func legacyEnqueue(t *testing.T, e *env, s *Store, nc policy.NewCallout) string {
	t.Helper()
	id, err := NewCalloutID(nc.Endpoint, s.rand)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clk.Now()
	fp := policy.Fingerprint(nc.Method, nc.Path, nc.Query, nc.Body)
	k := keysOf(nc.Endpoint)
	parts := k.parts(id)
	keys := []string{parts[0], parts[1], k.due, k.lease, k.ep}
	if ik := k.legacyIdem(nc.Issuer, nc.IdempotencyKey); ik != "" {
		keys = append(keys, ik)
	}
	args := append([]any{msArg(now), id, fp, nc.Body, "0", "0", "0", "0", issuerTag(nc.Issuer),
		msArg(now), nc.ReplayOf, ""}, requestFields(id, nc, fp, now)...)
	v, err := legacyScript(t, "legacy_enqueue").Run(ctxT(t), e.b.Client, keys, args...).Result()
	if err != nil || replyStr(replyArr(v)[0]) != "created" {
		t.Fatalf("legacy enqueue = %v, %v", v, err)
	}
	return id
}

func legacyReq(endpoint, key string) policy.NewCallout {
	return policy.NewCallout{
		Endpoint: endpoint, Issuer: "https://org.my.salesforce.com", Method: http.MethodPost,
		Path: "/v1/old", Query: "v=1", Header: http.Header{"Content-Type": {"application/json"}, "X-Old": {"1"}},
		Body: []byte(`{"old":true}`), IdempotencyKey: key, SourceRecord: "001000000000009AAA",
	}
}

// A legacy callout is read, claimed alongside layout-2 ones, completed, and
// its bytes released; its reservation still answers a retry of its key.
func TestLegacyRecordClaimedAndCompleted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		nc := legacyReq("old-api", "old-key")
		old := legacyEnqueue(t, e, s, nc)
		if _, n, _ := s.Backlog(ctxT(t), "old-api"); n == 0 {
			t.Fatal("the legacy callout is not charged")
		}
		got := mustGet(t, s, old)
		if got.State != policy.Scheduled || got.Method != http.MethodPost || got.Path != "/v1/old" ||
			string(got.Body) != `{"old":true}` || got.Header.Get("X-Old") != "1" || got.Issuer != nc.Issuer {
			t.Fatalf("legacy record read as %+v", got)
		}
		fresh := mustEnqueueReq(t, s, req("old-api", "new-key", "{}"))
		// A retry of the legacy key is answered from the legacy reservation.
		dup, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
		if err != nil || dup.Existing == nil || dup.Existing.ID != old || !dup.Existing.SameRequest {
			t.Fatalf("retry of the legacy key = %+v, %v", dup, err)
		}
		cl := mustClaim(t, s, "old-api", claimOpts)
		if len(cl.Claimed) != 2 {
			t.Fatalf("claimed %d, want the legacy and the new callout", len(cl.Claimed))
		}
		for _, c := range cl.Claimed {
			if c.ID == old && (c.Path != "/v1/old" || string(c.Body) != `{"old":true}` || c.Attempt != 1 || c.Kind != policy.KindFirst) {
				t.Fatalf("legacy claim = %+v", c)
			}
			if c.ID != old && c.ID != fresh {
				t.Fatalf("claimed %s, want %s or %s", c.ID, old, fresh)
			}
			if r := mustComplete(t, s, c, success()); r.State != policy.Succeeded {
				t.Fatalf("complete %s = %+v", c.ID, r)
			}
		}
		if items, n, _ := s.Backlog(ctxT(t), "old-api"); items != 0 || n != 0 {
			t.Fatalf("after both succeeded: %d items %d bytes, want 0 0", items, n)
		}
		got = mustGet(t, s, old)
		if got.State != policy.Succeeded || got.Response == nil || got.Response.Status != 201 || len(got.Body) != 0 {
			t.Fatalf("legacy record after success = %+v", got)
		}
		dup, err = s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
		if err != nil || dup.Existing == nil || dup.Existing.ID != old || dup.Existing.Callout.State != policy.Succeeded {
			t.Fatalf("retry after success = %+v, %v", dup, err)
		}
	})
}

// Legacy leases are reaped, legacy due callouts drained by Disable, legacy
// dead letters listed and discarded with their bytes released.
func TestLegacyReapDrainDiscard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		old := legacyEnqueue(t, e, s, legacyReq("oldr-api", "k1"))
		c := mustClaim(t, s, "oldr-api", claimOpts).Claimed[0]
		e.clk.Advance(testLease + time.Second)
		if ids, err := s.Reap(ctxT(t), "oldr-api", 10); err != nil || len(ids) != 1 || ids[0] != old {
			t.Fatalf("reap = %v, %v", ids, err)
		}
		if _, err := s.Complete(ctxT(t), c, success()); err == nil {
			t.Fatal("the reaped worker completed")
		}
		c = mustClaim(t, s, "oldr-api", claimOpts).Claimed[0]
		comp := failure(time.Time{})
		comp.Action, comp.Reason = policy.ActionDeadLetter, policy.DeadLetterPermanent
		mustComplete(t, s, c, comp)
		page, err := s.DeadLetters(ctxT(t), policy.DeadLetterQuery{Endpoint: "oldr-api"})
		if err != nil || len(page.Items) != 1 || page.Items[0].ID != old || page.Items[0].Path != "/v1/old" {
			t.Fatalf("dead letters = %+v, %v", page, err)
		}
		if err := s.Discard(ctxT(t), old); err != nil {
			t.Fatal(err)
		}
		if _, n, _ := s.Backlog(ctxT(t), "oldr-api"); n != 0 {
			t.Fatalf("discarded legacy dead letter still charged: %d bytes", n)
		}

		drained := legacyEnqueue(t, e, s, legacyReq("oldr-api", "k2"))
		fresh := mustEnqueueReq(t, s, req("oldr-api", "k3", "{}"))
		res, err := s.Disable(ctxT(t), "oldr-api", "test")
		if err != nil || len(res.DeadLettered) != 2 {
			t.Fatalf("disable = %+v, %v; want the legacy and the new callout drained", res, err)
		}
		for _, id := range []string{drained, fresh} {
			if got := mustGet(t, s, id); got.State != policy.DeadLettered || got.DeadLetterReason != policy.DeadLetterEndpointDisabled {
				t.Fatalf("%s after disable = %s %s", id, got.State, got.DeadLetterReason)
			}
		}
	})
}
