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
// type (script/: named by field, never by position). Run uses EVALSHA and
// falls back to EVAL on NOSCRIPT, so a flushed or restarted Redis costs one
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
	outcome     *script.Script[outcomeArgs, outcomeReply]
	disable     *script.Script[disableArgs, toldReply]
	notify      *script.Script[notifyArgs, toldReply]
	releaseHeld *script.Script[releaseHeldArgs, countReply]
	lock        *script.Script[lockArgs, countReply]
	dlPrune     *script.Script[pruneArgs, countReply]
}

// loadScripts loads the core's scripts and returns them with their
// helpers, script.Numbers then lib.lua, which proxy/redisstore/gateview's
// scripts are composed with too.
func loadScripts() (scripts, string, error) {
	b, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		return scripts{}, "", err
	}
	lib := script.Numbers + "\n" + string(b)
	var s scripts
	err = errors.Join(
		script.LoadInto(&s.create, luaFS, "create", script.Clock, lib),
		script.LoadInto(&s.complete, luaFS, "complete", script.Clock, lib),
		script.LoadInto(&s.claim, luaFS, "claim", script.Clock, lib),
		script.LoadInto(&s.reap, luaFS, "reap", script.Clock, lib),
		script.LoadInto(&s.release, luaFS, "release", script.Clock, lib),
		script.LoadInto(&s.discard, luaFS, "discard", script.Clock, lib),
		script.LoadInto(&s.drain, luaFS, "drain", script.Clock, lib),
		script.LoadInto(&s.outcome, luaFS, "outcome", script.Clock, lib),
		script.LoadInto(&s.disable, luaFS, "disable", script.Clock, lib),
		script.LoadInto(&s.notify, luaFS, "notify", script.Clock, lib),
		script.LoadInto(&s.releaseHeld, luaFS, "release_held", script.Clock, lib),
		script.LoadInto(&s.lock, luaFS, "lock", script.Clock, lib),
		script.LoadInto(&s.dlPrune, luaFS, "dl_prune", script.Clock, lib),
	)
	if err != nil {
		return s, "", fmt.Errorf("redisstore: %w", err)
	}
	return s, lib, nil
}
