package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// LayoutVersion is the version of the store's layout — its keys, records
// and scripts (keyspace) — that this binary reads and writes. A change of
// layout raises it and gives Migrate the step from the one before, as
// River numbers its migrations; two layouts are never read side by side.
const LayoutVersion = 1

// LayoutError reports a store whose layout is not this binary's.
type LayoutError struct {
	// Store is the store's layout version (-1: the key holds no version).
	Store int
	// Binary is this binary's, LayoutVersion.
	Binary int
	// Found is what the key holds when it is no version (Store -1): the
	// value quoted, or the kind of key ("a hash").
	Found string
}

// Error names both versions and what the operator can do.
func (e *LayoutError) Error() string {
	switch {
	case e.Store < 0:
		return fmt.Sprintf("redisstore: %s holds %s, which is no layout version (versions are whole numbers from 1): "+
			"this is not a store of a known layout; check redis.url (and its database), and delete the key only "+
			"if the store is empty (this binary's layout is %d)", keyspace.Layout, e.Found, e.Binary)
	case e.Store > e.Binary:
		return fmt.Sprintf("redisstore: the store's layout is version %d, newer than this binary's %d: "+
			"run a binary of layout %d or later (migrate cannot go back)", e.Store, e.Binary, e.Store)
	}
	return fmt.Sprintf("redisstore: the store's layout is version %d, this binary's is %d: "+
		"run `callout-proxy migrate --config FILE` with this binary first", e.Store, e.Binary)
}

// stampLayout reads the store's layout version, writing LayoutVersion
// when the store has none (a store never used: nothing to migrate) in the
// same command (SET … NX GET). It returns the version found, and false
// when there was none. Errors: ErrUnavailable; a LayoutError when the key
// holds no version (or is not a string).
func (s *Store) stampLayout(ctx context.Context) (int, bool, error) {
	old, err := s.rdb.SetArgs(ctx, keyspace.Layout, strconv.Itoa(LayoutVersion),
		redis.SetArgs{Mode: "NX", Get: true}).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil && redis.HasErrorPrefix(err, "WRONGTYPE") {
		kind, terr := s.rdb.Type(ctx, keyspace.Layout).Result()
		if terr != nil {
			kind = "another type"
		}
		return 0, true, &LayoutError{Store: -1, Binary: LayoutVersion, Found: "a " + kind + " key, not a string"}
	}
	if err != nil {
		return 0, false, s.wrap("layout", err)
	}
	// Only the canonical form of a version counts ("1", not "01", " 1",
	// "1.0"): anything else was not written by a binary of this project.
	v, err := strconv.Atoi(old)
	if err != nil || v < 1 || strconv.Itoa(v) != old {
		return 0, true, &LayoutError{Store: -1, Binary: LayoutVersion, Found: strconv.Quote(old)}
	}
	return v, true, nil
}

// CheckLayout is the start-up check: nil when the store's layout is
// LayoutVersion, or when the store has none yet — it is then stamped with
// it (the first use of a store). One round trip. Errors: a *LayoutError
// for a store of another layout (nothing is written; run Migrate, or a
// newer binary), ErrUnavailable.
func (s *Store) CheckLayout(ctx context.Context) error {
	v, found, err := s.stampLayout(ctx)
	if err != nil {
		return err
	}
	if found && v != LayoutVersion {
		return &LayoutError{Store: v, Binary: LayoutVersion}
	}
	s.layoutOK.Store(true)
	return nil
}

// layoutReady is the guard of Options.RequireLayout: nil once the layout
// has been confirmed (or when not required), else CheckLayout's answer.
func (s *Store) layoutReady(ctx context.Context) error {
	if !s.requireLayout || s.layoutOK.Load() {
		return nil
	}
	return s.CheckLayout(ctx)
}

// Migrate brings the store to LayoutVersion (`callout-proxy migrate`) and
// returns the version it found (0: none, the store was stamped; versions
// start at 1). There is
// one layout today, so it stamps an empty store and leaves a current one
// as it is; running it again changes nothing. Errors: a *LayoutError for a
// store of a newer or an unknown older layout (nothing is written),
// ErrUnavailable.
func (s *Store) Migrate(ctx context.Context) (from int, err error) {
	v, found, err := s.stampLayout(ctx)
	if err != nil {
		return 0, err
	}
	if found && v != LayoutVersion {
		return v, &LayoutError{Store: v, Binary: LayoutVersion}
	}
	s.layoutOK.Store(true)
	return v, nil
}
