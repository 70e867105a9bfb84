package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// libVersion is folded into the library's name: a change to how the
// library is composed (not only to a script) gets a new name.
const libVersion = "cp-functions-1"

// perCall marks, in a prelude, a statement that resets one of its
// module-level mutable locals: "--@per-call clock_now = nil". Under EVAL
// every call is a fresh chunk; in a function library the preludes' locals
// live as long as the library, so every function runs the group's
// per-call statements first.
var perCall = regexp.MustCompile(`(?m)^--@per-call (.+)$`)

// topLocal is a prelude's module-level local that is not a function.
var topLocal = regexp.MustCompile(`(?m)^local ([a-zA-Z_][a-zA-Z0-9_]*)(?:\s*=\s*(.*))?$`)

// auditPrelude returns an error when prelude p declares a module-level
// local that looks mutable (no initial value, or nil, false or true)
// without a --@per-call statement that assigns it: such a local would
// carry a value from one FCALL into the next. Tables, numbers and strings
// are the preludes' constants and must never be written by a script.
func auditPrelude(p string) error {
	reset := map[string]bool{}
	for _, m := range perCall.FindAllStringSubmatch(p, -1) {
		name, _, _ := strings.Cut(strings.TrimSpace(m[1]), "=")
		reset[strings.TrimSpace(name)] = true
	}
	for _, m := range topLocal.FindAllStringSubmatch(p, -1) {
		if m[1] == "function" {
			continue
		}
		v := strings.TrimSpace(m[2])
		if i := strings.Index(v, "--"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		mutable := v == "" || v == "nil" || v == "false" || v == "true"
		if mutable && !reset[m[1]] {
			return fmt.Errorf("prelude local %q is mutable but has no --@per-call reset", m[1])
		}
	}
	return nil
}

// readOnly are the commands a no-writes function may call (none of them
// writes nor replicates).
var readOnly = map[string]bool{
	"GET": true, "MGET": true, "STRLEN": true, "EXISTS": true, "TYPE": true, "TTL": true, "PTTL": true, "TIME": true,
	"HGET": true, "HMGET": true, "HGETALL": true, "HEXISTS": true, "HLEN": true, "HKEYS": true, "HVALS": true,
	"ZSCORE": true, "ZRANGE": true, "ZRANGEBYSCORE": true, "ZREVRANGE": true, "ZREVRANGEBYSCORE": true,
	"ZCOUNT": true, "ZCARD": true, "ZRANK": true, "ZREVRANK": true, "ZMSCORE": true,
	"SCARD": true, "SMEMBERS": true, "SISMEMBER": true, "LRANGE": true, "LLEN": true, "LINDEX": true,
}

var (
	callRe    = regexp.MustCompile(`redis\.p?call\(\s*(?:'([A-Za-z]+)'|"([A-Za-z]+)"|)`)
	localFnRe = regexp.MustCompile(`(?m)^local function ([a-zA-Z_][a-zA-Z0-9_]*)\(`)
	identRe   = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*`)
	// luaComment is a Lua line comment (the store's scripts have no '--'
	// inside strings; a string cut short only adds identifiers, which can
	// only make mayWrite say yes).
	luaComment = regexp.MustCompile(`--[^\n]*`)
)

// writes reports whether Lua text t may call a command outside readOnly
// directly: a literal write, or a command named by an expression.
func writes(t string) bool {
	for _, m := range callRe.FindAllStringSubmatch(t, -1) {
		c := strings.ToUpper(m[1] + m[2])
		if c == "" || !readOnly[c] {
			return true
		}
	}
	return false
}

// mayWrite reports whether a script whose body is body, composed with
// preludes, may write: the body calls a write command, or calls a
// prelude function that may (the prelude's module-level functions, a
// block each up to the next one, and the ones they call). Unsure is yes:
// the flag no-writes is given only to a script shown read-only.
func mayWrite(body string, preludes []string) bool {
	body = luaComment.ReplaceAllString(body, "")
	blocks := map[string]string{}
	for _, p := range preludes {
		p = luaComment.ReplaceAllString(p, "")
		idx := localFnRe.FindAllStringSubmatchIndex(p, -1)
		for i, m := range idx {
			end := len(p)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			blocks[p[m[2]:m[3]]] = p[m[0]:end]
		}
		// A prelude's top-level code outside functions runs at load, not
		// per call; a write there is impossible (no redis.call at load).
	}
	memo := map[string]int{} // 1 visiting or no, 2 yes
	var fnWrites func(name string) bool
	fnWrites = func(name string) bool {
		if v, ok := memo[name]; ok {
			return v == 2
		}
		memo[name] = 1
		b := blocks[name]
		w := writes(b)
		for _, id := range identRe.FindAllString(b, -1) {
			if w {
				break
			}
			if _, ok := blocks[id]; ok && id != name {
				w = fnWrites(id)
			}
		}
		if w {
			memo[name] = 2
		}
		return w
	}
	if writes(body) {
		return true
	}
	for _, id := range identRe.FindAllString(body, -1) {
		if _, ok := blocks[id]; ok && fnWrites(id) {
			return true
		}
	}
	return false
}

// entry is one registered script: what its function in the library is
// made of.
type entry struct {
	name     string // the script's name
	sha      string // its EVAL source's SHA-1
	reader   string // the generated K/A reader
	preludes []string
	body     string
	ro       bool // no-writes
}

// library is the function library of a Functions' scripts: its Lua text,
// its name, and each script's function name by the script's SHA-1 (boxed
// once, for the FCALL argument list).
type library struct {
	name  string
	text  string
	names map[string]any
	ping  string
}

// build composes the library of entries: its name is cp_ and 12 hex digits
// of the SHA-1 of its text (and libVersion), so it names its sources; scripts with the
// same preludes share one do … end block in which the preludes are
// defined once, and each is a function cp_<lib>_<script>_<8 hex of its
// SHA-1> whose callback runs the block's per-call resets, then the
// script's reader and body, with KEYS and ARGV its parameters. Every
// function has the flag allow-cross-slot-keys (an EVAL without a shebang
// may touch keys of several slots; the store's scripts keep to one, but
// the functions are not made stricter than the EVAL path) and, when
// mayWrite shows it reads only, no-writes (so it runs under maxmemory,
// where a function that may write is refused, as EVAL runs it).
func build(entries map[string]*entry) *library {
	shas := make([]string, 0, len(entries))
	for sha := range entries {
		shas = append(shas, sha)
	}
	slices.Sort(shas)
	// The text is composed with a placeholder for the name, which is then
	// the hash of the text: any change to a script, a prelude, a flag or the
	// composition is a new library.
	const name = "\x00lib\x00"
	groups := map[string][]*entry{}
	var keys []string
	for _, sha := range shas {
		e := entries[sha]
		k := strings.Join(e.preludes, "\x00")
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], e)
	}
	l := &library{name: name, names: make(map[string]any, len(entries)), ping: name + "_ping"}
	var b strings.Builder
	fmt.Fprintf(&b, "#!lua name=%s\n", name)
	for _, k := range keys {
		g := groups[k]
		b.WriteString("do\n")
		var resets []string
		for _, p := range g[0].preludes {
			b.WriteString(p)
			b.WriteString("\n")
			for _, m := range perCall.FindAllStringSubmatch(p, -1) {
				resets = append(resets, m[1])
			}
		}
		for _, e := range g {
			fn := fmt.Sprintf("%s_%s_%s", name, e.name, e.sha[:8])
			l.names[e.sha] = fn
			flags := "'allow-cross-slot-keys'"
			if e.ro {
				flags += ", 'no-writes'"
			}
			fmt.Fprintf(&b, "redis.register_function{function_name='%s', flags={%s}, callback=function(KEYS, ARGV)\n", fn, flags)
			for _, r := range resets {
				b.WriteString(r)
				b.WriteString("\n")
			}
			b.WriteString(e.reader)
			b.WriteString("\n")
			b.WriteString(e.body)
			b.WriteString("\nend}\n")
		}
		b.WriteString("end\n")
	}
	fmt.Fprintf(&b, "redis.register_function{function_name='%s', flags={'no-writes'}, callback=function() return 1 end}\n", l.ping)
	sum := sha1.Sum([]byte(libVersion + b.String()))
	l.name = "cp_" + hex.EncodeToString(sum[:])[:12]
	l.text = strings.ReplaceAll(b.String(), name, l.name)
	l.ping = l.name + "_ping"
	for sha, fn := range l.names {
		l.names[sha] = strings.Replace(fn.(string), name, l.name, 1)
	}
	return l
}

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
// from all of them on its first script command, the client's mode
// (undecided, functions or EVAL) and, as the client's go-redis hook, the
// rewrite of each registered script's EVALSHA as FCALL of its function.
// Make one per client with Attach, at the composition root (the store's
// New), and hand it to every store package that runs scripts on that
// client: then the client has one library, whatever order the packages
// are made in. A Functions holds nothing of any other client's; its
// methods are safe for concurrent use, and a nil *Functions is a client
// that keeps the EVALSHA/EVAL path.
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

// Attach returns the Functions of rdb and adds its hook to rdb, so that rdb
// runs the scripts registered with it as Redis Functions where it can: on
// rdb's first command of a registered script, the library of every script
// registered so far (Library) is built, loaded on every master (FUNCTION
// LOAD; on a Cluster on each master) and checked with an FCALL, and from
// then on each EVALSHA of a script in it is sent as FCALL of its function,
// in Run, Queue and Call alike (the hook rewrites the command; its keys and
// their routing are unchanged). The first load decides the mode: refused —
// no FUNCTION command (the embedded store, Redis < 7), an ACL without
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
// Attach adds a hook to rdb, so it must come
// before rdb is used by several goroutines (the store's New, at the
// composition root); each call makes a new Functions with a library of its
// own. rdb nil: nil.
func Attach(rdb redis.UniversalClient, log *slog.Logger) *Functions {
	if evalOnly {
		return AttachEval(rdb, log)
	}
	f := attach(rdb, log)
	if f != nil {
		rdb.AddHook(f)
	}
	return f
}

// AttachEval is Attach for tests that run the EVALSHA/EVAL path on a
// Redis that has functions (the store's Options.Scripts): the Functions
// registers scripts but adds no hook, so rdb never loads a library nor
// sends FCALL. The binary never calls it. rdb nil: nil.
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

// attach is the Functions of rdb, undecided and without its hook (Attach
// and AttachEval add what differs). rdb nil: nil.
func attach(rdb redis.UniversalClient, log *slog.Logger) *Functions {
	if rdb == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Functions{rdb: rdb, log: log, now: time.Now, entries: map[string]*entry{}}
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
	f.entries[sha] = &entry{name: name, sha: sha, reader: reader, preludes: slices.Clone(preludes), body: body,
		ro: !mayWrite(body, preludes)}
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

// DialHook is redis.Hook's; Functions does nothing there.
func (f *Functions) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook is redis.Hook's: it rewrites a script's EVALSHA as FCALL.
func (f *Functions) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.rewrite(ctx, cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook is redis.Hook's: ProcessHook for each command of a
// pipeline or transaction.
func (f *Functions) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			f.rewrite(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}

// rewrite turns cmd, when it is the EVALSHA of a script in f's library,
// into the FCALL of its function (same numkeys, keys and arguments, in
// place), building and loading the library first when it is not loaded
// yet and a load is due.
func (f *Functions) rewrite(ctx context.Context, cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 || args[0] != "evalsha" || f.mode.Load() == modeEval {
		return
	}
	sha, ok := args[1].(string)
	if !ok {
		return
	}
	l := f.loaded.Load()
	if l != nil {
		if fn, ok := l.names[sha]; ok {
			args[0], args[1] = "fcall", fn
		}
		return // the library never changes: a script not in it goes by EVALSHA
	}
	cur := f.library()
	if _, ok := cur.names[sha]; !ok {
		return // not one of ours: EVALSHA as sent
	}
	if l = f.ensure(ctx, cur); l == nil {
		return
	}
	if fn, ok := l.names[sha]; ok {
		args[0], args[1] = "fcall", fn
	}
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
		f.log.Info("redis scripts: EVALSHA/EVAL", "reason", err.Error())
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
