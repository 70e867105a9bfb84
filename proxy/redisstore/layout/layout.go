// Package layout is the store's layout version (keyspace cp:layout): the
// start-up check that refuses a store of another layout with both versions
// named, and the `callout-proxy migrate` step, in River's shape (one
// version key, numbered migrations, never two layouts read side by side).
package layout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Version is the version of the store's layout — its keys, records
// and scripts (keyspace) — that this binary reads and writes. A change of
// layout raises it and gives Migrate the step from the one before, as
// River numbers its migrations; two layouts are never read side by side.
//
// Layouts: 1, one due and one lease set per queue (cp:{sN}:d:{ep},
// cp:{sN}:l:{ep}); 2, one pair per organisation of the queue,
// cp:{sN}:d:{ep}:{tag} and cp:{sN}:l:{ep}:{tag} (keyspace "Organisation
// queues"; callouts without an issuer stay in the unsuffixed sets), and the
// endpoint hash's 'po' lists open partitions with their last failure (a
// count of layout 1 reads as none).
const Version = 2

// Error reports a store whose layout is not this binary's.
type Error struct {
	// Store is the store's layout version (-1: the key holds no version).
	Store int
	// Binary is this binary's, Version.
	Binary int
	// Found is what the key holds when it is no version (Store -1): the
	// value quoted, or the kind of key ("a hash").
	Found string
}

// Error names both versions and what the operator can do.
func (e *Error) Error() string {
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

// stamp reads the store's layout version, writing Version
// when the store has none (a store never used: nothing to migrate) in the
// same command (SET … NX GET). It returns the version found, and false
// when there was none. Errors: policy.ErrUnavailable; an *Error when the key
// holds no version (or is not a string).
func stamp(ctx context.Context, rdb redis.UniversalClient) (int, bool, error) {
	old, err := rdb.SetArgs(ctx, keyspace.Layout, strconv.Itoa(Version),
		redis.SetArgs{Mode: "NX", Get: true}).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil && redis.HasErrorPrefix(err, "WRONGTYPE") {
		kind, terr := rdb.Type(ctx, keyspace.Layout).Result()
		if terr != nil {
			kind = "another type"
		}
		return 0, true, &Error{Store: -1, Binary: Version, Found: "a " + kind + " key, not a string"}
	}
	if err != nil {
		return 0, false, script.Wrap("redisstore: layout", err)
	}
	// Only the canonical form of a version counts ("1", not "01", " 1",
	// "1.0"): anything else was not written by a binary of this project.
	v, err := strconv.Atoi(old)
	if err != nil || v < 1 || strconv.Itoa(v) != old {
		return 0, true, &Error{Store: -1, Binary: Version, Found: strconv.Quote(old)}
	}
	return v, true, nil
}

// Check is the start-up check: nil when the store's layout is Version, or
// when the store has none yet — it is then stamped with it (the first use
// of a store). One round trip. Errors: an *Error for a store of another
// layout (nothing is written; run Migrate, or a newer binary),
// policy.ErrUnavailable (script.Wrap).
func Check(ctx context.Context, rdb redis.UniversalClient) error {
	v, found, err := stamp(ctx, rdb)
	if err != nil {
		return err
	}
	if found && v != Version {
		return &Error{Store: v, Binary: Version}
	}
	return nil
}

// Migrate brings the store to Version (`callout-proxy migrate`) and
// returns the version it found (0: none, the store was stamped; versions
// start at 1). It stamps an empty store, leaves a current one as it is,
// and brings a layout-1 store forward (orgQueues), stamping Version only
// when every step is done, so an interrupted run is simply run again:
// each step is idempotent. Every replica must be stopped first (a layout-1
// replica still running would write the old sets). Errors: a *Error for a
// store of a newer or an unknown layout (nothing is written),
// policy.ErrUnavailable (script.Wrap).
func Migrate(ctx context.Context, rdb redis.UniversalClient) (from int, err error) {
	v, found, err := stamp(ctx, rdb)
	if err != nil {
		return 0, err
	}
	switch {
	case !found || v == Version:
		return v, nil
	case v != 1:
		return v, &Error{Store: v, Binary: Version}
	}
	if err := orgQueues(ctx, rdb); err != nil {
		return v, script.Wrap("redisstore: migrate 1 to 2", err)
	}
	if err := rdb.Set(ctx, keyspace.Layout, strconv.Itoa(Version), 0).Err(); err != nil {
		return v, script.Wrap("redisstore: migrate 1 to 2", err)
	}
	return v, nil
}

// orgQueues is the step from layout 1 to 2: every member of a queue's
// due or lease set (cp:{sN}:d:{ep}, cp:{sN}:l:{ep}) whose callout record
// (cp:{sN}:c:{id}, field record.FieldIssuer "i") names an issuer tag moves,
// with its score, to that organisation's set (cp:{sN}:d:{ep}:{tag}); the
// others (no issuer, or no record: the claim and the reaper deal with them
// as before) stay. Each member moves in one MULTI (ZADD then ZREM, one
// slot), so a re-run after an interruption moves what is left and nothing
// twice. Every primary of a cluster is scanned.
func orgQueues(ctx context.Context, rdb redis.UniversalClient) error {
	move := func(ctx context.Context, key string) error {
		prefix, set, ok := strings.Cut(key, "}:")
		if !ok || strings.Contains(set[2:], ":") { // an organisation's set, name "d:ep:tag"
			return nil
		}
		prefix += "}:"
		// kept members stay at the front of the set (every member before
		// them was kept too), so the next page starts after them.
		for kept := int64(0); ; {
			members, err := rdb.ZRangeWithScores(ctx, key, kept, kept+499).Result()
			if err != nil || len(members) == 0 {
				return err
			}
			for _, m := range members {
				id := m.Member.(string)
				tag, err := rdb.HGet(ctx, prefix+"c:"+id, "i").Result()
				if errors.Is(err, redis.Nil) || tag == "" {
					kept++
					continue
				}
				if err != nil {
					return err
				}
				if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.ZAdd(ctx, key+":"+tag, m)
					p.ZRem(ctx, key, id)
					return nil
				}); err != nil {
					return err
				}
			}
		}
	}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		for _, pattern := range []string{keyspace.Prefix + "{s*}:d:*", keyspace.Prefix + "{s*}:l:*"} {
			it := c.Scan(ctx, 0, pattern, 1000).Iterator()
			for it.Next(ctx) {
				if err := move(ctx, it.Val()); err != nil {
					return err
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, rdb)
}
