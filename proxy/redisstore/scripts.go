package redisstore

import (
	"embed"
	"fmt"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
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
	// a queue's callouts (keys.go)
	create   *script.Script[createArgs, createResult]
	complete *script.Script[completeArgs, completeReply]
	claim    *script.Script[claimArgs, claimReply]
	reap     *script.Script[reapArgs, reapReply]
	release  *script.Script[releaseArgs, resultReply]
	discard  *script.Script[discardArgs, resultReply]
	drain    *script.Script[drainArgs, drainReply]
	// the endpoint hash, the dead-letter index, a lock
	outcome                                            *script.Script[outcomeArgs, outcomeReply]
	admit                                              *script.Script[admitArgs, admitReply]
	disable, deadLetters, lock                         *redis.Script
	releaseHeld, gateRead, dlPrune, noteShards, notify *redis.Script
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

		{&s.disable, "disable"},
		{&s.deadLetters, "dead_letters"}, {&s.lock, "lock"}, {&s.releaseHeld, "release_held"},
		{&s.gateRead, "gate_read"}, {&s.dlPrune, "dl_prune"}, {&s.noteShards, "note_shards"}, {&s.notify, "notify"},
	} {
		if *p.dst, err = load(p.name); err != nil {
			return scripts{}, err
		}
	}
	if s.create, err = script.Load[createArgs, createResult](luaFS, "create", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.complete, err = script.Load[completeArgs, completeReply](luaFS, "complete", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.claim, err = script.Load[claimArgs, claimReply](luaFS, "claim", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.outcome, err = script.Load[outcomeArgs, outcomeReply](luaFS, "outcome", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.admit, err = script.Load[admitArgs, admitReply](luaFS, "admit", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.reap, err = script.Load[reapArgs, reapReply](luaFS, "reap", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.release, err = script.Load[releaseArgs, resultReply](luaFS, "release", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.discard, err = script.Load[discardArgs, resultReply](luaFS, "discard", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	if s.drain, err = script.Load[drainArgs, drainReply](luaFS, "drain", string(lib)); err != nil {
		return scripts{}, fmt.Errorf("redisstore: %w", err)
	}
	return s, nil
}
