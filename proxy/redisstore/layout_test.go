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
