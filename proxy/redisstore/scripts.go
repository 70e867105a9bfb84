package redisstore

import (
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// luaFS holds the Lua scripts, one file each; lib.lua and lib2.lua hold
// the helpers they share and are prepended to each, so every script loaded
// into Redis is one self-contained chunk. The legacy_*.lua scripts serve
// records of the layout before layout 2 (keys.go) until they are gone.
//
//go:embed lua/*.lua
var luaFS embed.FS

// scripts are the store's loaded scripts. Run uses EVALSHA and falls back
// to EVAL on NOSCRIPT (go-redis Script.Run), so a flushed or restarted
// Redis costs one extra round trip, never an error.
type scripts struct {
	// layout 2 (keys.go)
	create, claim, complete, reap, release, drain, discard *redis.Script
	// the legacy layout (records written before layout 2)
	legacyClaim, legacyComplete, legacyReap, legacyDrain, legacyDiscard *redis.Script
	// both layouts, or the endpoint hash only
	disable, admit, outcome, deadLetters, lock         *redis.Script
	releaseHeld, gateRead, dlPrune, noteShards, notify *redis.Script
}

// libLua is the shared prelude of every script: lib.lua, then lib2.lua.
func libLua() (string, error) {
	lib, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		return "", err
	}
	lib2, err := luaFS.ReadFile("lua/lib2.lua")
	if err != nil {
		return "", err
	}
	return string(lib) + "\n" + string(lib2), nil
}

func loadScripts() (scripts, error) {
	lib, err := libLua()
	if err != nil {
		return scripts{}, err
	}
	load := func(name string) (*redis.Script, error) {
		body, err := luaFS.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return nil, fmt.Errorf("redisstore: script %s: %w", name, err)
		}
		return redis.NewScript(lib + "\n" + string(body)), nil
	}
	var s scripts
	for _, p := range []struct {
		dst  **redis.Script
		name string
	}{
		{&s.create, "create"}, {&s.claim, "claim"}, {&s.complete, "complete"},
		{&s.reap, "reap"}, {&s.release, "release"}, {&s.drain, "drain"}, {&s.discard, "discard"},
		{&s.legacyClaim, "legacy_claim"}, {&s.legacyComplete, "legacy_complete"},
		{&s.legacyReap, "legacy_reap"}, {&s.legacyDrain, "legacy_drain"},
		{&s.legacyDiscard, "legacy_discard"},
		{&s.disable, "disable"}, {&s.admit, "admit"}, {&s.outcome, "outcome"},
		{&s.deadLetters, "dead_letters"}, {&s.lock, "lock"}, {&s.releaseHeld, "release_held"},
		{&s.gateRead, "gate_read"}, {&s.dlPrune, "dl_prune"}, {&s.noteShards, "note_shards"}, {&s.notify, "notify"},
	} {
		if *p.dst, err = load(p.name); err != nil {
			return scripts{}, err
		}
	}
	return s, nil
}
