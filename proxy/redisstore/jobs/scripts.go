package jobs

import (
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
)

// luaFS holds the job scripts, one file each; lib.lua holds the helpers
// they share and is prepended to each, so every script loaded into Redis is
// one self-contained chunk.
//
//go:embed lua/*.lua
var luaFS embed.FS

// scripts are the job store's loaded scripts, each with its argument and
// reply type (proxy/redisstore/script: named by field, never by position).
type scripts struct {
	acquire *script.Script[acquireArgs, acquireReply]
	collect *script.Script[collectArgs, collectReply]
	send    *script.Script[sendArgs, resultReply]
	claim   *script.Script[claimArgs, claimReply]
	item    *script.Script[itemArgs, itemReply]
	finish  *script.Script[finishArgs, resultReply]
	cancel  *script.Script[cancelArgs, cancelReply]
	release *script.Script[releaseArgs, releaseReply]
}

// Every script's result is "ok" or why not: "missing" (no such job),
// "final", "busy", "cancel", "lost" or "full" (refusal turns each into its
// policy error). Now is 0, which makes the script read Redis's clock
// (script.Clock), or with Options.PinScriptTime a test's now in Unix ms;
// a lease is a duration the script adds to that now (ARCHITECTURE.md "One
// clock").

// resultReply is a reply that is only a result (send.lua, finish.lua).
type resultReply struct {
	Result string `lua:"result"`
}

// acquireArgs are acquire.lua's keys and arguments.
type acquireArgs struct {
	Job   string        `lua:"job,key"`
	Now   int64         `lua:"now"`
	Owner string        `lua:"owner"`
	Lease time.Duration `lua:"lease"`
}

// acquireReply is acquire.lua's reply: with "ok", the whole job hash
// afterwards as HGETALL reads it (field, value, …).
type acquireReply struct {
	Result string   `lua:"result"`
	Job    []string `lua:"job"`
}

// collectArgs are collect.lua's keys and arguments: Cap is the most items
// the job may hold.
type collectArgs struct {
	Job      string        `lua:"job,key"`
	Items    string        `lua:"items,key"`
	Queue    string        `lua:"queue,key"`
	Now      int64         `lua:"now"`
	Owner    string        `lua:"owner"`
	Lease    time.Duration `lua:"lease"`
	Cap      int           `lua:"cap"`
	Position string        `lua:"position"`
	IDs      []string      `lua:"ids"`
}

// collectReply is collect.lua's reply: Total is the job's item count
// afterwards ("ok" and "full").
type collectReply struct {
	Result string `lua:"result"`
	Total  int    `lua:"total"`
}

// sendArgs are send.lua's keys and arguments.
type sendArgs struct {
	Job   string        `lua:"job,key"`
	Now   int64         `lua:"now"`
	Owner string        `lua:"owner"`
	Lease time.Duration `lua:"lease"`
}

// claimArgs are claim.lua's keys and arguments: Next is the send position
// after the claimed item.
type claimArgs struct {
	Job        string        `lua:"job,key"`
	Items      string        `lua:"items,key"`
	Now        int64         `lua:"now"`
	Owner      string        `lua:"owner"`
	Lease      time.Duration `lua:"lease"`
	Next       int           `lua:"next"`
	DeadLetter string        `lua:"dead_letter"`
}

// claimReply is claim.lua's reply: "ok" (claimed), "done" with the item's
// stored State (it was not queued), or a refusal.
type claimReply struct {
	Result string `lua:"result"`
	State  string `lua:"state"`
}

// itemArgs are item.lua's keys and arguments: Result is the stored form of
// the item's result (encodeItem), Counter the job hash field it counts in.
type itemArgs struct {
	Job        string `lua:"job,key"`
	Items      string `lua:"items,key"`
	Now        int64  `lua:"now"`
	DeadLetter string `lua:"dead_letter"`
	Result     string `lua:"result"`
	Counter    string `lua:"counter"`
}

// itemReply is item.lua's reply: whether the result was recorded (false:
// the item was not pending).
type itemReply struct {
	Recorded bool `lua:"recorded"`
}

// finishArgs are finish.lua's keys and arguments: State is the final
// state, Error why the job failed ("" none), Retention how long its keys
// stay.
type finishArgs struct {
	Job       string        `lua:"job,key"`
	Items     string        `lua:"items,key"`
	Queue     string        `lua:"queue,key"`
	Now       int64         `lua:"now"`
	Owner     string        `lua:"owner"`
	State     string        `lua:"state"`
	Error     string        `lua:"error"`
	Retention time.Duration `lua:"retention"`
}

// cancelArgs are cancel.lua's keys and arguments: By is who cancels (an
// admin token's name).
type cancelArgs struct {
	Job       string        `lua:"job,key"`
	Items     string        `lua:"items,key"`
	Queue     string        `lua:"queue,key"`
	Now       int64         `lua:"now"`
	By        string        `lua:"by"`
	Retention time.Duration `lua:"retention"`
}

// cancelReply is cancel.lua's reply: "missing", or "ok" with the job's
// State afterwards.
type cancelReply struct {
	Result string `lua:"result"`
	State  string `lua:"state"`
}

// releaseArgs are release.lua's keys and arguments.
type releaseArgs struct {
	Job   string `lua:"job,key"`
	Owner string `lua:"owner"`
}

// releaseReply is release.lua's reply: whether the caller held the lease.
type releaseReply struct {
	Released bool `lua:"released"`
}

// loadScripts loads the job scripts, each composed with script.Clock and
// script.Lib, registered with f.
func loadScripts(f *script.Functions) (scripts, error) {
	lib, err := script.Lib(luaFS)
	if err != nil {
		return scripts{}, fmt.Errorf("jobs: %w", err)
	}
	p := script.Package{FS: luaFS, Prelude: []string{script.Clock, lib}, Functions: f}
	var s scripts
	err = errors.Join(
		script.LoadInto(&s.acquire, p, "acquire"),
		script.LoadInto(&s.collect, p, "collect"),
		script.LoadInto(&s.send, p, "send"),
		script.LoadInto(&s.claim, p, "claim"),
		script.LoadInto(&s.item, p, "item"),
		script.LoadInto(&s.finish, p, "finish"),
		script.LoadInto(&s.cancel, p, "cancel"),
		script.LoadInto(&s.release, p, "release"),
	)
	if err != nil {
		return s, fmt.Errorf("jobs: %w", err)
	}
	return s, nil
}
