package layout_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
)

// A store's layout version (keyspace cp:layout): a fresh store is stamped
// on first use, a matching one passes, another one is refused by the
// start-up check and by migrate with both versions named, and migrate is
// idempotent.
func TestLayoutVersion(t *testing.T) {
	redistest.ForEach(t, testLayoutVersion)
}

func testLayoutVersion(t *testing.T, b redistest.Backend) {
	ctx := t.Context()
	rdb := b.Client
	version := func() string { return rdb.Get(ctx, keyspace.Layout).Val() }
	check := func() error { return layout.Check(ctx, rdb) }
	migrate := func() (int, error) { return layout.Migrate(ctx, rdb) }
	{

		if err := check(); err != nil {
			t.Fatalf("fresh store: %v", err)
		}
		if got := version(); got != strconv.Itoa(layout.Version) {
			t.Fatalf("a fresh store is stamped %q, want %d", got, layout.Version)
		}
		if err := check(); err != nil {
			t.Fatalf("matching store: %v", err)
		}
		for range 2 {
			if from, err := migrate(); err != nil || from != layout.Version {
				t.Fatalf("migrate of a current store = %d, %v; want %d, nil", from, err, layout.Version)
			}
		}

		// An older store (there is none while layout.Version is 1: versions
		// start at 1, and "0" is no version, below) is told to migrate.
		if msg := (&layout.Error{Store: 1, Binary: 2}).Error(); !strings.Contains(msg, "callout-proxy migrate") {
			t.Errorf("an older store's error %q does not say to migrate", msg)
		}
		versions := []int{layout.Version + 1}
		if layout.Version > 1 {
			versions = append(versions, layout.Version-1)
		}
		for _, v := range versions {
			if err := rdb.Set(ctx, keyspace.Layout, strconv.Itoa(v), 0).Err(); err != nil {
				t.Fatal(err)
			}
			want := []string{"version " + strconv.Itoa(v), strconv.Itoa(layout.Version)}
			if v < layout.Version {
				want = append(want, "callout-proxy migrate")
			}
			refusals := map[string]error{"check": check()}
			if v > layout.Version { // an older one migrate brings forward (TestMigrateOrganisationQueues)
				refusals["migrate"] = second(migrate())
			}
			for name, err := range refusals {
				var le *layout.Error
				if !errors.As(err, &le) || le.Store != v || le.Binary != layout.Version {
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
			if err := rdb.Set(ctx, keyspace.Layout, bad, 0).Err(); err != nil {
				t.Fatal(err)
			}
			for name, check := range map[string]func() error{
				"Check":   check,
				"Migrate": func() error { return second(migrate()) },
			} {
				var le *layout.Error
				err := check()
				if !errors.As(err, &le) || le.Store != -1 || !strings.Contains(err.Error(), strconv.Quote(bad)) ||
					strings.Contains(err.Error(), "migrate --config") || version() != bad {
					t.Fatalf("%s of a layout key holding %q: %v (key now %q)", name, bad, err, version())
				}
			}
		}
		if err := rdb.Del(ctx, keyspace.Layout).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, keyspace.Layout, "v", "1").Err(); err != nil {
			t.Fatal(err)
		}
		var le *layout.Error
		if err := check(); !errors.As(err, &le) || le.Store != -1 || !strings.Contains(err.Error(), "a hash key") {
			t.Fatalf("a layout key that is a hash: %v", err)
		}

		if err := rdb.Del(ctx, keyspace.Layout).Err(); err != nil {
			t.Fatal(err)
		}
		if from, err := migrate(); err != nil || from != 0 || version() != strconv.Itoa(layout.Version) {
			t.Fatalf("migrate of an empty store = %d, %v, version %q; want 0, nil, %d", from, err, version(), layout.Version)
		}
	}
}

func second[T any](_ T, err error) error { return err }
