package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
	"github.com/redis/go-redis/v9"
)

// TestRequireLayoutHoldsWritesUntilConfirmed: a store that requires its
// layout writes no callout and claims nothing while the layout is another
// binary's (a replica that started with Redis down and was never checked),
// and works at once when it is this binary's; nothing is written before.
func TestRequireLayoutHoldsWritesUntilConfirmed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := New(e.b.Client, Options{PinScriptTime: true, Now: e.clk.Now, RequireLayout: true})
		if err := e.b.Client.Set(ctxT(t), keyspace.Layout, strconv.Itoa(layout.Version+1), 0).Err(); err != nil {
			t.Fatal(err)
		}
		nc := req("layout-api", "k-1", "{}")
		opts := policy.BeginOptions{Lease: testLease}
		var le *layout.Error
		if _, err := s.Begin(ctxT(t), nc, opts); !errors.As(err, &le) {
			t.Fatalf("Begin on another layout: %v, want a LayoutError", err)
		}
		if _, err := s.ClaimBatch(ctxT(t), []ClaimRequest{{Endpoint: "layout-api", ClaimOptions: ClaimOptions{Batch: 1, Lease: testLease}}}, 1); !errors.As(err, &le) {
			t.Fatalf("ClaimBatch on another layout: %v, want a LayoutError", err)
		}
		if n := dbSize(t, e); n != 1 {
			t.Fatalf("%d keys before the layout was confirmed, want only %s", n, keyspace.Layout)
		}
		if err := e.b.Client.Set(ctxT(t), keyspace.Layout, strconv.Itoa(layout.Version), 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Begin(ctxT(t), nc, opts); err != nil {
			t.Fatalf("Begin once the layout is this binary's: %v", err)
		}
	})
}

// dbSize is the number of keys on the backend, every master of a cluster
// summed.
func dbSize(t *testing.T, e *env) int64 {
	t.Helper()
	if cc, ok := e.b.Client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var n int64
		if err := cc.ForEachMaster(ctxT(t), func(ctx context.Context, c *redis.Client) error {
			k, err := c.DBSize(ctx).Result()
			mu.Lock()
			n += k
			mu.Unlock()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	n, err := e.b.Client.DBSize(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Migrating a layout-1 store (layout.Migrate, `callout-proxy migrate`): its
// queue's one due set and one lease set hold every organisation's callouts;
// migrate moves each member to its organisation's set by the issuer tag of
// its record, leaves the callout without an issuer where it is, stamps
// layout 2, and changes nothing when run again; then every callout is
// claimed. The start-up check refuses the layout-1 store before.
func TestMigrateOrganisationQueues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx, rdb := ctxT(t), e.b.Client
		s := partitionedStore(e)
		const ep = "migrate-api"
		enqueueOf(t, s, ep, orgA, 3)
		enqueueOf(t, s, ep, orgB, 2)
		enqueueOf(t, s, ep, "", 1)
		inflight := mustClaim(t, s, ep, ClaimOptions{Batch: 1, Lease: testLease}) // one in a lease set
		if len(inflight.Claimed) != 1 {
			t.Fatalf("claimed %d, want 1", len(inflight.Claimed))
		}
		// back to layout 1: every organisation's members in the queue's sets
		home := keyspace.HomeQueue(ep)
		old := map[string]string{}
		for _, org := range []string{orgA, orgB} {
			q := home.ForOrg(keyspace.IssuerTag(org), "")
			old[q.Due], old[q.Lease] = home.Due, home.Lease
		}
		for from, to := range old {
			zs, err := rdb.ZRangeWithScores(ctx, from, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, z := range zs {
				rdb.ZAdd(ctx, to, z)
			}
			rdb.Del(ctx, from)
		}
		if n := rdb.ZCard(ctx, home.Due).Val() + rdb.ZCard(ctx, home.Lease).Val(); n != 6 {
			t.Fatalf("layout-1 sets hold %d callouts, want 6", n)
		}
		if err := rdb.Set(ctx, keyspace.Layout, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		var le *layout.Error
		if err := layout.Check(ctx, rdb); !errors.As(err, &le) || le.Store != 1 || le.Binary != 2 {
			t.Fatalf("start-up check of a layout-1 store: %v, want versions 1 and 2 named", err)
		}
		for run, want := range []int{1, 2} {
			if from, err := layout.Migrate(ctx, rdb); err != nil || from != want {
				t.Fatalf("migrate run %d = %d, %v; want %d, nil", run+1, from, err, want)
			}
			if err := layout.Check(ctx, rdb); err != nil {
				t.Fatalf("check after migrate run %d: %v", run+1, err)
			}
			if due, lease := rdb.ZCard(ctx, home.Due).Val(), rdb.ZCard(ctx, home.Lease).Val(); due != 1 || lease != 0 {
				t.Fatalf("after run %d the queue's own sets hold %d due, %d leased; want the issuer-less one due", run+1, due, lease)
			}
		}
		got := byOrg(mustClaim(t, s, ep, ClaimOptions{Batch: 10, Lease: testLease}).Claimed)
		got[inflight.Claimed[0].Issuer]++
		if got[orgA] != 3 || got[orgB] != 2 || got[""] != 1 {
			t.Fatalf("claimed after migrate (with the one in flight) %v, want org-a 3, org-b 2, none 1", got)
		}
	})
}
