package redisstore

import (
	"embed"
	"errors"
	"fmt"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
)

// luaFS holds the Lua scripts, one file each; lib.lua holds the helpers
// they share and is prepended to each, so every script loaded into Redis is
// one self-contained chunk.
//
//go:embed lua/*.lua
var luaFS embed.FS

// scripts are the store's loaded scripts, each with its argument and reply
// type (script/: named by field, never by position), registered with the
// Store's script.Functions: Redis Functions where Redis has them, else
// EVALSHA with EVAL on NOSCRIPT, so a flushed or restarted Redis costs one
// extra round trip, never an error.
type scripts struct {
	// a queue's callouts (keyspace)
	create   *script.Script[createArgs, createResult]
	complete *script.Script[completeArgs, completeReply]
	claim    *script.Script[claimArgs, claimReply]
	reap     *script.Script[reapArgs, reapReply]
	release  *script.Script[releaseArgs, resultReply]
	discard  *script.Script[discardArgs, resultReply]
	drain    *script.Script[drainArgs, drainReply]
	// the endpoint hash, the dead-letter index, a lock
	outcome *script.Script[outcomeArgs, outcomeReply]
	disable *script.Script[disableArgs, toldReply]
	notify  *script.Script[notifyArgs, toldReply]
	lock    *script.Script[lockArgs, countReply]
	dlPrune *script.Script[pruneArgs, countReply]
}

// loadScripts loads the core's scripts, registered with f (nil: none, the
// EVAL path), and returns them with their helpers, script.Numbers then
// lib.lua (script.Lib), which proxy/redisstore/gateview's scripts are
// composed with too.
func loadScripts(f *script.Functions) (scripts, string, error) {
	lib, err := script.Lib(luaFS)
	if err != nil {
		return scripts{}, "", fmt.Errorf("redisstore: %w", err)
	}
	p := script.Package{FS: luaFS, Prelude: []string{script.Clock, lib}, Functions: f}
	var s scripts
	err = errors.Join(
		script.LoadInto(&s.create, p, "create"),
		script.LoadInto(&s.complete, p, "complete"),
		script.LoadInto(&s.claim, p, "claim"),
		script.LoadInto(&s.reap, p, "reap"),
		script.LoadInto(&s.release, p, "release"),
		script.LoadInto(&s.discard, p, "discard"),
		script.LoadInto(&s.drain, p, "drain"),
		script.LoadInto(&s.outcome, p, "outcome"),
		script.LoadInto(&s.disable, p, "disable"),
		script.LoadInto(&s.notify, p, "notify"),
		script.LoadInto(&s.lock, p, "lock"),
		script.LoadInto(&s.dlPrune, p, "dl_prune"),
	)
	if err != nil {
		return s, "", fmt.Errorf("redisstore: %w", err)
	}
	return s, lib, nil
}
