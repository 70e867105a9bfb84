package redisstore

import (
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// luaFS holds the Lua scripts, one file each; lib.lua holds the helpers
// they share and is prepended to each, so every script loaded into Redis is
// one self-contained chunk.
//
//go:embed lua/*.lua
var luaFS embed.FS

// scripts are the store's loaded scripts. Run uses EVALSHA and falls back
// to EVAL on NOSCRIPT (go-redis Script.Run), so a flushed or restarted
// Redis costs one extra round trip, never an error.
type scripts struct {
	begin, enqueue, claim, complete, reap *redis.Script
	disable, drain, admit, outcome        *redis.Script
	discard, deadLetters, release, lock   *redis.Script
	releaseHeld, gateRead, dlPrune        *redis.Script
}

func loadScripts() (scripts, error) {
	lib, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		return scripts{}, err
	}
	load := func(name string) (*redis.Script, error) {
		body, err := luaFS.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return nil, fmt.Errorf("redisstore: script %s: %w", name, err)
		}
		return redis.NewScript(string(lib) + "\n" + string(body)), nil
	}
	var s scripts
	for _, p := range []struct {
		dst  **redis.Script
		name string
	}{
		{&s.begin, "begin"}, {&s.enqueue, "enqueue"}, {&s.claim, "claim"},
		{&s.complete, "complete"}, {&s.reap, "reap"}, {&s.disable, "disable"},
		{&s.drain, "drain"}, {&s.admit, "admit"}, {&s.outcome, "outcome"},
		{&s.discard, "discard"}, {&s.deadLetters, "dead_letters"},
		{&s.release, "release"}, {&s.lock, "lock"}, {&s.releaseHeld, "release_held"},
		{&s.gateRead, "gate_read"}, {&s.dlPrune, "dl_prune"},
	} {
		if *p.dst, err = load(p.name); err != nil {
			return scripts{}, err
		}
	}
	return s, nil
}
