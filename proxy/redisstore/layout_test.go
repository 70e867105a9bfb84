package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// A store's layout version (keyspace cp:layout): a fresh store is stamped
// on first use, a matching one passes, another one is refused by the
// start-up check and by migrate with both versions named, and migrate is
// idempotent.
func TestLayoutVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		version := func() string { return e.b.Client.Get(ctxT(t), keyspace.Layout).Val() }

		if err := s.CheckLayout(ctxT(t)); err != nil {
			t.Fatalf("fresh store: %v", err)
		}
		if got := version(); got != strconv.Itoa(LayoutVersion) {
			t.Fatalf("a fresh store is stamped %q, want %d", got, LayoutVersion)
		}
		if err := s.CheckLayout(ctxT(t)); err != nil {
			t.Fatalf("matching store: %v", err)
		}
		for range 2 {
			if from, err := s.Migrate(ctxT(t)); err != nil || from != LayoutVersion {
				t.Fatalf("migrate of a current store = %d, %v; want %d, nil", from, err, LayoutVersion)
			}
		}

		// An older store (there is none while LayoutVersion is 1: versions
		// start at 1, and "0" is no version, below) is told to migrate.
		if msg := (&LayoutError{Store: 1, Binary: 2}).Error(); !strings.Contains(msg, "callout-proxy migrate") {
			t.Errorf("an older store's error %q does not say to migrate", msg)
		}
		versions := []int{LayoutVersion + 1}
		if LayoutVersion > 1 {
			versions = append(versions, LayoutVersion-1)
		}
		for _, v := range versions {
			if err := e.b.Client.Set(ctxT(t), keyspace.Layout, strconv.Itoa(v), 0).Err(); err != nil {
				t.Fatal(err)
			}
			want := []string{"version " + strconv.Itoa(v), strconv.Itoa(LayoutVersion)}
			if v < LayoutVersion {
				want = append(want, "callout-proxy migrate")
			}
			for name, err := range map[string]error{"check": s.CheckLayout(ctxT(t)), "migrate": second(s.Migrate(ctxT(t)))} {
				var le *LayoutError
				if !errors.As(err, &le) || le.Store != v || le.Binary != LayoutVersion {
					t.Fatalf("%s of a store at %d: %v, want a LayoutError", name, v, err)
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not say %q", name, err, w)
					}
				}
			}
			if got := version(); got != strconv.Itoa(v) {
				t.Fatalf("a refused store's version became %q", got)
			}
		}

		// Values no binary writes: named as found, never answered "run
		// migrate" (which would refuse them again), by CheckLayout and
		// Migrate alike; nothing is written.
		for _, bad := range []string{"two", "0", "-1", "01", " 1", "1.0", "", "99999999999999999999"} {
			if err := e.b.Client.Set(ctxT(t), keyspace.Layout, bad, 0).Err(); err != nil {
				t.Fatal(err)
			}
			for name, check := range map[string]func() error{
				"CheckLayout": func() error { return s.CheckLayout(ctxT(t)) },
				"Migrate":     func() error { return second(s.Migrate(ctxT(t))) },
			} {
				var le *LayoutError
				err := check()
				if !errors.As(err, &le) || le.Store != -1 || !strings.Contains(err.Error(), strconv.Quote(bad)) ||
					strings.Contains(err.Error(), "migrate --config") || version() != bad {
					t.Fatalf("%s of a layout key holding %q: %v (key now %q)", name, bad, err, version())
				}
			}
		}
		if err := e.b.Client.Del(ctxT(t), keyspace.Layout).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.b.Client.HSet(ctxT(t), keyspace.Layout, "v", "1").Err(); err != nil {
			t.Fatal(err)
		}
		var le *LayoutError
		if err := s.CheckLayout(ctxT(t)); !errors.As(err, &le) || le.Store != -1 || !strings.Contains(err.Error(), "a hash key") {
			t.Fatalf("a layout key that is a hash: %v", err)
		}

		if err := e.b.Client.Del(ctxT(t), keyspace.Layout).Err(); err != nil {
			t.Fatal(err)
		}
		if from, err := s.Migrate(ctxT(t)); err != nil || from != 0 || version() != strconv.Itoa(LayoutVersion) {
			t.Fatalf("migrate of an empty store = %d, %v, version %q; want 0, nil, %d", from, err, version(), LayoutVersion)
		}
	})
}

func second[T any](_ T, err error) error { return err }

// TestRequireLayoutHoldsWritesUntilConfirmed: a store that requires its
// layout writes no callout and claims nothing while the layout is another
// binary's (a replica that started with Redis down and was never checked),
// and works at once when it is this binary's; nothing is written before.
func TestRequireLayoutHoldsWritesUntilConfirmed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := New(e.b.Client, Options{PinScriptTime: true, Now: e.clk.Now, RequireLayout: true})
		if err := e.b.Client.Set(ctxT(t), keyspace.Layout, strconv.Itoa(LayoutVersion+1), 0).Err(); err != nil {
			t.Fatal(err)
		}
		nc := req("layout-api", "k-1", "{}")
		opts := policy.BeginOptions{Lease: testLease}
		var le *LayoutError
		if _, err := s.Begin(ctxT(t), nc, opts); !errors.As(err, &le) {
			t.Fatalf("Begin on another layout: %v, want a LayoutError", err)
		}
		if _, err := s.ClaimBatch(ctxT(t), []ClaimRequest{{Endpoint: "layout-api", ClaimOptions: ClaimOptions{Batch: 1, Lease: testLease}}}, 1); !errors.As(err, &le) {
			t.Fatalf("ClaimBatch on another layout: %v, want a LayoutError", err)
		}
		if n := dbSize(t, e); n != 1 {
			t.Fatalf("%d keys before the layout was confirmed, want only %s", n, keyspace.Layout)
		}
		if err := e.b.Client.Set(ctxT(t), keyspace.Layout, strconv.Itoa(LayoutVersion), 0).Err(); err != nil {
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
