// Package hold moves an endpoint's waiting callouts between scheduled and
// held, the state their records keep (docs/contract.md §12 "A callout's
// state", §6), when their gate changes: a result that shuts a gate holds
// the callouts already waiting behind it, and a success that closes a
// breaker, or an admin's reset or enable, releases them (lua/park.lua; the
// rule itself is the core's lib.lua holds, which create.lua, complete.lua
// and reap.lua apply to a callout that meets a shut gate). The core store
// (proxy/redisstore) owns one and calls it after the scripts that change a
// gate; docs/performance.md "Held callouts" has its cost.
package hold

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/queues"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/wake"
	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// batch is how many callouts one park.lua run takes (the core's maxBatch).
const batch = 1000

// Options are a Walker's settings; every field but PinScriptTime is
// required.
type Options struct {
	// Lib is the core's lib.lua (script.Lib), park.lua's prelude.
	Lib string
	// Now is the clock (the core's Options.Now); with PinScriptTime it is
	// the script's now too, else the script reads Redis's clock.
	Now           func() time.Time
	PinScriptTime bool
	// Scripts is the client's script layer (redisstore.Store.Scripts).
	Scripts *script.Functions
	// Queues and Gates are the core's: an endpoint's queues, and the gate
	// of a queue outside the endpoint hash's slot.
	Queues *queues.Tracker
	Gates  *gateview.Views
}

// Walker holds and releases an endpoint's waiting callouts on one Redis. It
// is safe for concurrent use.
type Walker struct {
	rdb  redis.UniversalClient
	o    Options
	park *script.Script[parkArgs, parkReply]
}

// New returns a Walker on rdb. Errors: park.lua does not load (a build
// defect: it is embedded).
func New(rdb redis.UniversalClient, o Options) (*Walker, error) {
	w := &Walker{rdb: rdb, o: o}
	p := script.Package{FS: luaFS, Prelude: []string{script.Clock, o.Lib}, Functions: o.Scripts}
	if err := script.LoadInto(&w.park, p, "park"); err != nil {
		return nil, fmt.Errorf("hold: %w", err)
	}
	return w, nil
}

// Hold holds the waiting callouts a result just shut endpoint's gate on:
// every scheduled callout of level's queues (level: the breaker partition
// whose gate it is, "" the endpoint's own breaker or pause, which holds
// every queue) is held while the gate is shut, due at its reopening if it
// was due before (park.lua reads the gate; reopen, Redis-clock ms, is the
// reopening the result reported, which bounds the first window). It
// returns how many it held. Errors: policy.ErrUnavailable; the callouts not
// reached still say scheduled, though the gate holds them back.
func (w *Walker) Hold(ctx context.Context, endpoint, level string, reopen int64) (int, error) {
	return w.walk(ctx, endpoint, level, true, reopen)
}

// Release makes endpoint's held callouts (every queue) scheduled where
// their gate is no longer shut: due now when they waited for the
// reopening, at their own time when that is later, and wakes the
// dispatchers when it released any (package wake). It returns how many it
// released. Errors: policy.ErrUnavailable.
func (w *Walker) Release(ctx context.Context, endpoint string) (int, error) {
	n, err := w.walk(ctx, endpoint, "", false, 0)
	if n > 0 {
		wake.Publish(ctx, w.rdb, endpoint)
	}
	return n, err
}

// walk runs park.lua over endpoint's queues (hold: level's), each in two
// windows walked by offset, batch callouts a run. Release: first those due
// later than now (each released moves to now, out of that window; none is
// claimed meanwhile: none is due), then those due by now (none moves; one
// a claim takes meanwhile may make the walk pass over another, which is due
// and the next claim's anyway). Hold: first those due before reopen (each
// held moves to the reopening, out of that window), then the rest (none
// moves; claims skip a shut gate).
func (w *Walker) walk(ctx context.Context, endpoint, level string, hold bool, reopen int64) (int, error) {
	qs, err := w.o.Queues.Orgs(ctx, endpoint, true)
	if err != nil {
		return 0, err
	}
	at := strconv.FormatInt(w.o.Now().UnixMilli(), 10)
	moves, stays := [2]string{"(" + at, "+inf"}, [2]string{"-inf", at}
	if hold {
		at = strconv.FormatInt(reopen, 10)
		moves, stays = [2]string{"-inf", "(" + at}, [2]string{at, "+inf"}
	}
	moved := 0
	for _, q := range qs {
		if hold && level != "" && q.Part != level {
			continue
		}
		for i, win := range [][2]string{moves, stays} {
			n, err := w.window(ctx, q, hold, win, i == 0)
			moved += n
			if err != nil {
				return moved, err
			}
		}
	}
	return moved, nil
}

// window runs park.lua over the members of q's due set scored within win
// (ZRANGEBYSCORE's bounds), batch at a time; leaves: the callouts it
// changes leave the window.
func (w *Walker) window(ctx context.Context, q keyspace.Queue, hold bool, win [2]string, leaves bool) (int, error) {
	rng := &redis.ZRangeBy{Min: win[0], Max: win[1], Count: batch}
	moved := 0
	for {
		ids, err := w.rdb.ZRangeByScore(ctx, q.Due, rng).Result()
		if err != nil || len(ids) == 0 {
			return moved, script.Wrap("redisstore: park", err)
		}
		a := parkArgs{Due: q.Due, Counters: q.Counters, Hold: hold, Part: q.Part}
		if w.o.PinScriptTime {
			a.Now = w.o.Now().UnixMilli()
		}
		if !q.Home {
			// the endpoint hash is in another slot: the gate read now
			v, err := w.o.Gates.Read(ctx, q.Endpoint, q.Part)
			if err != nil {
				return moved, err
			}
			a.Gate, a.GateUntil = v.Args(true)
		}
		for _, id := range ids {
			c, _, _ := q.Record(id)
			a.Callouts = append(a.Callouts, parkedCallout{Record: c, ID: id})
		}
		v, err := w.park.Run(ctx, w.rdb, &a)
		if err != nil {
			return moved, script.Wrap("redisstore: park", err)
		}
		moved += int(v.N)
		rng.Offset += int64(len(ids))
		if leaves {
			rng.Offset -= v.N
		}
		if len(ids) < batch {
			return moved, nil
		}
	}
}

// parkArgs are park.lua's keys and arguments (lua/park.lua names each).
type parkArgs struct {
	Due       string          `lua:"due,key"`
	Counters  string          `lua:"counters,key"`
	Now       int64           `lua:"now"`
	Hold      bool            `lua:"hold"`
	Part      string          `lua:"part"`
	Gate      string          `lua:"gate"`
	GateUntil string          `lua:"gate_until"`
	Callouts  []parkedCallout `lua:"callouts"`
}

// parkedCallout is one candidate of park.lua.
type parkedCallout struct {
	Record string `lua:"record,key"`
	ID     string `lua:"id"`
}

// parkReply is park.lua's reply: how many callouts changed state.
type parkReply struct {
	N int64 `lua:"n"`
}
