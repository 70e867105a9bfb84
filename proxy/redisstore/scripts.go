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
	admit       *script.Script[admitArgs, admitReply]
	disable     *script.Script[disableArgs, toldReply]
	notify      *script.Script[notifyArgs, toldReply]
	releaseHeld *script.Script[releaseHeldArgs, countReply]
	lock        *script.Script[lockArgs, countReply]
	dlPrune     *script.Script[pruneArgs, countReply]
	noteShards  *script.Script[noteShardsArgs, noteShardsReply]
	deadLetters *script.Script[deadLettersArgs, deadLettersReply]
	gateRead    *script.Script[gateReadArgs, gateReadReply]
	replayMark  *script.Script[replayMarkArgs, countReply]
}

// loadInto loads lua/<name>.lua with lib.lua before it into dst.
func loadInto[A, R any](dst **script.Script[A, R], name, lib string) error {
	sc, err := script.Load[A, R](luaFS, name, script.Clock, lib)
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	*dst = sc
	return nil
}

func loadScripts() (scripts, error) {
	b, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		return scripts{}, err
	}
	lib := string(b)
	var s scripts
	err = errors.Join(
		loadInto(&s.create, "create", lib), loadInto(&s.complete, "complete", lib),
		loadInto(&s.claim, "claim", lib), loadInto(&s.reap, "reap", lib),
		loadInto(&s.release, "release", lib), loadInto(&s.discard, "discard", lib),
		loadInto(&s.drain, "drain", lib), loadInto(&s.outcome, "outcome", lib),
		loadInto(&s.admit, "admit", lib), loadInto(&s.disable, "disable", lib),
		loadInto(&s.notify, "notify", lib), loadInto(&s.releaseHeld, "release_held", lib),
		loadInto(&s.lock, "lock", lib), loadInto(&s.dlPrune, "dl_prune", lib),
		loadInto(&s.noteShards, "note_shards", lib), loadInto(&s.deadLetters, "dead_letters", lib),
		loadInto(&s.gateRead, "gate_read", lib), loadInto(&s.replayMark, "replay_mark", lib),
	)
	return s, err
}
