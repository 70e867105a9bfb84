package script

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Modes of a Functions.
const (
	modeUndecided int32 = iota
	modeFunctions
	modeEval
)

// retryDelay is the least time between two loads of the library that
// failed (a down Redis, an out-of-memory or busy one is not sent the
// library on every command).
const retryDelay = time.Second

// Functions is one Redis client's script layer: the scripts registered
// with it (New, Load and LoadInto given it), the ONE function library built
// from all of them on its first script command, and the client's mode
// (undecided, functions or EVAL), from which each of its Scripts builds
// its command, FCALL or EVALSHA. Make one per client with Attach, at the
// composition root (the store's New), and hand it to every store package
// that runs scripts on that client: then the client has one library,
// whatever order the packages are made in. A Functions holds nothing of
// any other client's; its methods are safe for concurrent use, and a nil
// *Functions is a client that keeps the EVALSHA/EVAL path.
type Functions struct {
	rdb redis.UniversalClient
	log *slog.Logger
	now func() time.Time

	// reg guards entries and lib: the scripts registered, and the library
	// built from them on first use (nil before; once built, it never
	// changes, and a script registered later is left out of it).
	reg     sync.Mutex
	entries map[string]*entry
	lib     atomic.Pointer[library]
	// audited and scans are the preludes checked by auditPrelude and
	// scanned for mayWrite, each text (each set) once, not once a script:
	// a store's scripts share their preludes. Guarded by reg.
	audited map[string]bool
	scans   map[string]*preludeScan

	// The hot path reads only these atomics: mode, the library when it is
	// loaded on every master (nil: not, or not any more), and retryAt, the
	// Unix ns before which no load is tried after one failed.
	mode    atomic.Int32
	loaded  atomic.Pointer[library]
	retryAt atomic.Int64
	// gen counts the loads tried (either outcome): a call answered
	// "Function not found" that was sent before the latest one does not
	// load the library again (one load per flush, however many callers).
	gen atomic.Uint64
	// mu is held while a load is in flight (one per client at a time).
	mu sync.Mutex
}

// Attach returns the Functions of rdb, which runs the scripts registered
// with it as Redis Functions where rdb can: on the first run of a
// registered script, the library of every script registered so far
// (Library) is built, loaded on every master (FUNCTION LOAD; on a Cluster
// on each master) and checked with an FCALL, and from then on a script in
// it is sent as FCALL of its function, in Run, Queue and Call alike (the
// same numkeys, keys and arguments as its EVALSHA, so a Cluster routes it
// by the same key). The first load decides the mode: refused — no
// FUNCTION command (the embedded store, Redis < 7), an ACL without
// FUNCTION LOAD or FCALL (NOPERM), any other error reply — rdb keeps the
// EVALSHA/EVAL path for good; a connection-level failure or the caller's
// context ending leaves the choice to a later command. Once rdb uses
// functions, a lost library ("Function not found") is loaded again, and a
// failed load is transient whatever the reply (OOM under maxmemory, BUSY):
// the scripts go by EVALSHA meanwhile and the load is tried again at most
// once a second; only NOPERM (an ACL changed at runtime) moves rdb to the
// EVAL path for good. The mode, and each successful reload, is logged
// once on log (nil: none). No environment variable nor setting changes
// this (a test build with the tag scripts_eval makes Attach AttachEval).
// Attach does not change rdb; each call makes a new Functions with a
// library of its own. rdb nil: nil.
func Attach(rdb redis.UniversalClient, log *slog.Logger) *Functions {
	if evalOnly {
		return AttachEval(rdb, log)
	}
	return attach(rdb, log)
}

// AttachEval is Attach for tests that run the EVALSHA/EVAL path on a
// Redis that has functions (the store's Options.Scripts): the Functions
// registers scripts but is on the EVAL path from the start, so rdb never
// loads a library nor sends FCALL. The binary never calls it. rdb nil:
// nil.
func AttachEval(rdb redis.UniversalClient, log *slog.Logger) *Functions {
	f := attach(rdb, log)
	if f != nil {
		f.mode.Store(modeEval)
		reason := "script.AttachEval (a test)"
		if evalOnly {
			reason = "a test build with the tag scripts_eval"
		}
		f.log.Info("redis scripts: EVALSHA/EVAL", "reason", reason)
	}
	return f
}

// attach is the Functions of rdb, undecided (Attach; AttachEval sets the
// EVAL path). rdb nil: nil.
func attach(rdb redis.UniversalClient, log *slog.Logger) *Functions {
	if rdb == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Functions{rdb: rdb, log: log, now: time.Now, entries: map[string]*entry{},
		audited: map[string]bool{}, scans: map[string]*preludeScan{}}
}

// register adds a script to f's library (once per SHA-1), unless the
// library is built already: then the script is left out of it and runs by
// EVALSHA/EVAL (logged; every package's scripts are registered when it is
// made, before the client's first script command).
func (f *Functions) register(name, sha, reader, body string, preludes []string) {
	f.reg.Lock()
	defer f.reg.Unlock()
	if _, ok := f.entries[sha]; ok {
		return
	}
	if f.lib.Load() != nil {
		f.log.Warn("redis scripts: a script made after the first script call runs by EVALSHA", "script", name)
		return
	}
	key := strings.Join(preludes, "\x00")
	ps := f.scans[key]
	if ps == nil {
		ps = scanPreludes(preludes)
		f.scans[key] = ps
	}
	f.entries[sha] = &entry{name: name, sha: sha, reader: reader, preludes: slices.Clone(preludes), body: body,
		ro: !ps.mayWrite(body)}
}

// audit is auditPrelude of each of preludes, each text checked once per
// f. Errors: auditPrelude's.
func (f *Functions) audit(preludes []string) error {
	f.reg.Lock()
	defer f.reg.Unlock()
	for _, p := range preludes {
		if f.audited[p] {
			continue
		}
		if err := auditPrelude(p); err != nil {
			return err
		}
		f.audited[p] = true
	}
	return nil
}

// library is f's library, built on its first call from the scripts
// registered so far.
func (f *Functions) library() *library {
	if l := f.lib.Load(); l != nil {
		return l
	}
	f.reg.Lock()
	defer f.reg.Unlock()
	if l := f.lib.Load(); l != nil {
		return l
	}
	l := build(f.entries)
	f.lib.Store(l)
	return l
}

// Library is the Lua source of f's function library (FUNCTION LOAD's
// argument) and its name, building it when it is not built yet (a script
// registered afterwards is not in it); for tests and tools.
func (f *Functions) Library() (name, text string) {
	l := f.library()
	return l.name, l.text
}

// UsesFunctions reports whether f's client runs the scripts as Redis
// Functions now: false before its first script command, on the EVAL path,
// while a lost library is not loaded again, and for a nil f.
func (f *Functions) UsesFunctions() bool {
	return f != nil && f.mode.Load() == modeFunctions && f.loaded.Load() != nil
}

// function is the FCALL name of the script whose source's SHA-1 is sha
// on f's client now, loading f's library first when it is not loaded and
// a load is due (ensure); nil: the call goes by EVALSHA — f nil or on the
// EVAL path, the script not in the library (registered after it was
// built), or the library not loaded. Lock-free but for a due load.
func (f *Functions) function(ctx context.Context, sha string) any {
	if f == nil || f.mode.Load() == modeEval {
		return nil
	}
	l := f.loaded.Load()
	if l == nil {
		if l = f.library(); l.names[sha] == nil {
			return nil // not in the library: no load for it
		}
		if l = f.ensure(ctx, l); l == nil {
			return nil
		}
	}
	return l.names[sha]
}

// due reports whether a load may be tried now: the mode is not EVAL and
// the retry delay after a failed load has passed. Lock-free.
func (f *Functions) due() bool {
	return f.mode.Load() != modeEval && f.now().UnixNano() >= f.retryAt.Load()
}

// ensure loads library cur on the client when it is not loaded and a load
// is due, deciding the mode on the first load; it returns the library
// loaded, or nil when the command goes the EVALSHA way: not due (no lock
// taken), or a load in flight on another goroutine (this command does not
// wait for it).
func (f *Functions) ensure(ctx context.Context, cur *library) *library {
	if !f.due() || !f.mu.TryLock() {
		return nil
	}
	defer f.mu.Unlock()
	if l := f.loaded.Load(); l == cur {
		return l
	}
	if !f.due() || !f.try(ctx, cur) {
		return nil
	}
	return cur
}

// generation is the count of loads tried so far; a call notes it before it
// is sent, for reload.
func (f *Functions) generation() uint64 {
	if f == nil {
		return 0
	}
	return f.gen.Load()
}

// reload loads the library again after a call sent at generation gen was
// answered "Function not found" (FUNCTION FLUSH, a restarted Redis without
// persistence, a failover to a node that never got it); it reports whether
// the retry may go as FCALL. A load tried since gen (by another caller, or
// in flight: reload waits for it) is not repeated, and none is tried
// within the retry delay of a failed one.
func (f *Functions) reload(ctx context.Context, gen uint64) bool {
	if f.mode.Load() != modeFunctions {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen.Load() != gen {
		return f.loaded.Load() != nil
	}
	if f.mode.Load() != modeFunctions || !f.due() {
		return false
	}
	return f.try(ctx, f.library())
}

// try loads cur (f.mu held) and records the outcome: loaded (the mode
// decided, or the reload logged); on the first load, a refusal decides the
// EVAL path; once functions are in use, NOPERM moves the client to EVAL
// (logged as the mode) and any other failure is transient — the scripts go
// by EVALSHA and the next load waits retryDelay.
func (f *Functions) try(ctx context.Context, cur *library) bool {
	err := f.load(ctx, cur)
	f.gen.Add(1)
	mode := f.mode.Load()
	switch {
	case err == nil:
		f.loaded.Store(cur)
		f.retryAt.Store(0)
		if mode == modeUndecided {
			f.mode.Store(modeFunctions)
			f.log.Info("redis scripts: Redis Functions", "library", cur.name, "functions", len(cur.names))
		} else {
			f.log.Info("redis scripts: function library loaded again", "library", cur.name, "functions", len(cur.names))
		}
		return true
	case !transient(err) && (mode == modeUndecided || redis.HasErrorPrefix(err, "NOPERM")):
		f.loaded.Store(nil)
		f.mode.Store(modeEval)
		f.log.Info("redis scripts: EVALSHA/EVAL", "reason", shortReason(err))
		return false
	default:
		f.loaded.Store(nil)
		f.retryAt.Store(f.now().Add(retryDelay).UnixNano())
		if mode == modeFunctions {
			f.log.Warn("redis scripts: loading the function library failed; EVALSHA until it loads (retried every second)",
				"library", cur.name, "err", err)
		}
		return false
	}
}

// transient reports a load failure that says nothing about Redis's
// support for functions: Redis unreachable or busy (Unavailable), or the
// calling request's context ended.
func transient(err error) bool {
	return Unavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// load loads l on every master (FUNCTION LOAD; a library of that name
// already there is the same library, its name being its sources' hash)
// and checks that FCALL runs (its ping function).
func (f *Functions) load(ctx context.Context, l *library) error {
	loadOn := func(ctx context.Context, n redis.Cmdable) error {
		err := n.FunctionLoad(ctx, l.text).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	var err error
	if cc, ok := f.rdb.(*redis.ClusterClient); ok {
		// ForEachMaster runs the callback on several goroutines at once:
		// the callback shares nothing but the library, read-only.
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return loadOn(ctx, n) })
	} else {
		err = loadOn(ctx, f.rdb)
	}
	if err != nil {
		return err
	}
	return f.rdb.FCall(ctx, l.ping, nil).Err()
}

// funcNotFound reports FCALL's reply for a function the server does not
// have (Redis 7: "ERR Function not found"); it did not run.
func funcNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// Missing reports whether err, a pipeline's error (Pipelined's) or a
// call's, says Redis did not have a script: NOSCRIPT (EVALSHA of a flushed
// or restarted server) or "Function not found" (FCALL after FUNCTION FLUSH
// or a failover). The script did not run, and Call.Result runs it again,
// so a caller that checks the pipeline's error before reading its Calls
// passes over these as it does redis.Nil.
func Missing(err error) bool {
	return noScript(err) || funcNotFound(err)
}

// maxReason bounds the reason logged for the EVAL path, in bytes: a Redis
// without FUNCTION (miniredis, Redis < 7) repeats the whole command in
// its error, the library's Lua included (about 120 KB).
const maxReason = 200

// shortReason is err's text, cut to maxReason bytes with "…" after.
func shortReason(err error) string {
	r := err.Error()
	if len(r) <= maxReason {
		return r
	}
	return strings.ToValidUTF8(r[:maxReason], "") + "…"
}
