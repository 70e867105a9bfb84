// Package deadletters reads an endpoint's dead letters (contract §7 "Dead
// letters"): the pages of its dead-letter indexes, cp:{sN}:dl:{ep} (one a
// queue, keyspace), in dead-lettered-at order with a stable cursor, and the
// summaries of the records cp:{sN}:c:{id} they name, and keeps their
// replay marks (contract §8: which replay chain replays a dead letter, and
// how it ended). The core store (proxy/redisstore) writes the indexes and
// records, in the scripts that move a callout, and sweeps them (its
// PruneDeadLetters).
//
// It imports no other store package but the script layer, the keyspace and
// the record codec; the core tells it where an endpoint's indexes are
// (Indexes). Its scripts (lua/*.lua, embedded, after lib.lua) each have
// one Go type for their arguments and one for their reply
// (proxy/redisstore/script).
package deadletters

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Fields a replay adds to a dead letter's record cp:{sN}:c:{id} (package
// record lists the others), written by the core store (its MarkReplayed and
// complete.lua) and read into the summary (contract §8 "replayed_by").
const (
	FieldReplayedBy = "rb" // callout id of the latest replay chain of this dead letter
	FieldReplayedAt = "rt" // when that chain was created, Unix ms
	// FieldReplayOutcome is that chain's final state (succeeded,
	// dead_lettered) once it ended; absent while it is pending.
	FieldReplayOutcome = "rx"
	FieldReplayEnded   = "rxt" // when it ended, Unix ms
)

// DefaultLimit and MaxLimit bound one page of DeadLetters: a query's
// Limit of 0 or less means DefaultLimit; more than MaxLimit means
// MaxLimit.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Indexes is what a Store needs of the core store: the keys of
// endpoint's dead-letter indexes, one a queue (keyspace "Shards and
// queues"). Errors: policy.ErrUnavailable. *redisstore.Store implements
// it.
type Indexes interface {
	DeadLetterIndexes(ctx context.Context, endpoint string) ([]string, error)
}

// Store reads dead letters, and keeps their replay marks, on one Redis (a *redis.Client or a
// *redis.ClusterClient: each page reads one index, each summary one
// record). It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	idx  Indexes
	now  func() time.Time
	pin  bool
	list *script.Script[listArgs, listReply]
	mark *script.Script[markArgs, markReply]
}

// Options configures a Store. The zero value works.
type Options struct {
	// Now is this replica's clock, read only with PinScriptTime. Default
	// time.Now.
	Now func() time.Time
	// PinScriptTime, for tests that travel in time only, makes the replay
	// mark's script take Now() as its now instead of reading Redis's TIME
	// (the core's Options.PinScriptTime). Never set in production.
	PinScriptTime bool
	// Scripts is the script layer of the client (the store's
	// redisstore.Store.Scripts, made by script.Attach): the package's
	// scripts join its one function library. nil: a script.Functions of
	// the package's own on the client (a library of its own).
	Scripts *script.Functions
}

//go:embed lua/*.lua
var luaFS embed.FS

// New returns the Store of the dead letters on rdb whose indexes idx names.
func New(rdb redis.UniversalClient, idx Indexes, o Options) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Scripts == nil {
		o.Scripts = script.Attach(rdb, nil)
	}
	r := &Store{rdb: rdb, idx: idx, now: o.Now, pin: o.PinScriptTime}
	lib, err := script.Lib(luaFS)
	if err == nil {
		err = errors.Join(script.LoadInto(&r.list, script.Package{FS: luaFS, Functions: o.Scripts}, "list"),
			script.LoadInto(&r.mark, script.Package{FS: luaFS, Prelude: []string{script.Clock, lib}, Functions: o.Scripts}, "mark"))
	}
	if err != nil {
		panic(err) // the scripts are embedded: a build defect, not a runtime condition
	}
	return r
}

// DeadLetters lists an endpoint's dead letters (every queue) in
// dead-lettered-at order with a stable cursor: entries added or pruned
// between pages neither repeat nor skip the others (contract §7). Index
// entries whose record has expired are left out. Two round trips (list.lua
// on every queue's index, pipelined and merged by (time, id), then one
// pipelined HGETALL per item). Errors: policy.ErrUnavailable, or an error
// for a malformed cursor.
func (r *Store) DeadLetters(ctx context.Context, q policy.DeadLetterQuery) (policy.DeadLetterPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	until := int64(1 << 62)
	if !q.Until.IsZero() {
		until = q.Until.UnixMilli()
	}
	curMs, curID, err := parseCursor(q.Cursor)
	if err != nil {
		return policy.DeadLetterPage{}, err
	}
	dls, err := r.idx.DeadLetterIndexes(ctx, q.Endpoint)
	if err != nil {
		return policy.DeadLetterPage{}, err
	}
	calls := make([]*script.Call[listArgs, listReply], len(dls))
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, dl := range dls {
			calls[i] = r.list.Queue(ctx, p, &listArgs{DL: dl, SinceMs: strconv.FormatInt(q.Since.UnixMilli(), 10),
				UntilMs: until, CursorMs: curMs, CursorID: curID, Limit: limit})
		}
		return nil
	})
	type entry struct {
		id string
		ms int64
	}
	var all []entry
	for _, c := range calls {
		v, err := c.Result(ctx, r.rdb)
		if err != nil {
			return policy.DeadLetterPage{}, wrap("dead letters", err)
		}
		a := v.Entries
		for j := 0; j+1 < len(a); j += 2 {
			all = append(all, entry{a[j], scoreMs(a[j+1])})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].ms != all[j].ms {
			return all[i].ms < all[j].ms
		}
		return all[i].id < all[j].id
	})
	var page policy.DeadLetterPage
	if len(all) > limit {
		all = all[:limit]
		last := all[limit-1]
		page.Next = strconv.FormatInt(last.ms, 10) + "." + last.id
	}
	ids := make([]string, len(all))
	at := make([]time.Time, len(all))
	for i, e := range all {
		ids[i], at[i] = e.id, time.UnixMilli(e.ms)
	}
	sums, err := r.Summaries(ctx, ids)
	if err != nil {
		return page, err
	}
	for i, d := range sums {
		if d != nil {
			d.Endpoint, d.DeadLetteredAt = q.Endpoint, at[i]
			page.Items = append(page.Items, *d)
		}
	}
	return page, nil
}

// listArgs are list.lua's keys and arguments (lua/list.lua).
type listArgs struct {
	DL       string `lua:"dl,key"`
	SinceMs  string `lua:"since_ms"`
	UntilMs  int64  `lua:"until_ms"`
	CursorMs string `lua:"cursor_ms"`
	CursorID string `lua:"cursor_id"`
	Limit    int    `lua:"limit"`
}

// listReply is list.lua's reply: id, ms, id, ms, …
type listReply struct {
	Entries []string `lua:"entries"`
}

// parseCursor splits "ms.id"; "" is the first page.
func parseCursor(c string) (ms, id string, err error) {
	if c == "" {
		return "", "", nil
	}
	ms, id, ok := strings.Cut(c, ".")
	if _, err := strconv.ParseInt(ms, 10, 64); !ok || err != nil || id == "" {
		return "", "", fmt.Errorf("redisstore: dead letters: malformed cursor %q", c)
	}
	return ms, id, nil
}

// Summaries reads the dead-letter summaries of ids, in order: one
// pipelined HGETALL each. An entry is nil when that id is not a dead
// letter (any more). DeadLetteredAt is the record's finish time, which is
// the index's score. Errors: policy.ErrUnavailable.
func (r *Store) Summaries(ctx context.Context, ids []string) ([]*policy.DeadLetter, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			if key, ok := keyspace.Callout(id); ok {
				cmds[i] = p.HGetAll(ctx, key)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap("dead-letter summaries", err)
	}
	out := make([]*policy.DeadLetter, len(ids))
	for i, cmd := range cmds {
		if cmd != nil {
			out[i] = summary(ids[i], cmd.Val())
		}
	}
	return out, nil
}

// summary is the dead-letter summary of record m, nil when it is not a
// dead letter.
func summary(id string, m map[string]string) *policy.DeadLetter {
	if m[record.FieldState] != record.StateCode(policy.DeadLettered) {
		return nil
	}
	meta, err := record.MetaOf(m)
	if err != nil {
		return nil
	}
	return &policy.DeadLetter{
		ID: id, Endpoint: meta.Endpoint, DeadLetteredAt: record.ParseMs(m[record.FieldFinished]),
		Reason: policy.DeadLetterReason(m[record.FieldReason]), Status: atoi(m[record.FieldStatus]),
		Method: meta.Method, Path: meta.Path, Attempts: atoi(m[record.FieldAttempts]),
		IdempotencyKey: meta.Key, SourceRecord: meta.Source, ReplayOf: m[record.FieldReplayOf],
		LastError: m[record.FieldLastErr], ReplayedBy: m[FieldReplayedBy], ReplayedAt: record.ParseMs(m[FieldReplayedAt]),
		ReplayOutcome: policy.State(m[FieldReplayOutcome]),
	}
}

// wrap turns a Redis error into the store's (script.Wrap): connection-level
// failures wrap policy.ErrUnavailable.
func wrap(op string, err error) error { return script.Wrap("redisstore: "+op, err) }

// scoreMs parses a sorted-set score reply (a decimal that may be written
// in floating-point form) as Unix ms.
func scoreMs(v string) int64 {
	f, _ := strconv.ParseFloat(v, 64)
	return int64(f)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
