package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ModeEnv is the environment variable that, set to "eval", makes Attach
// keep a client on the EVALSHA/EVAL path even where Redis Functions work,
// so the tests run both paths on real Redis (CALLOUT_TEST_SCRIPTS=eval).
const ModeEnv = "CALLOUT_TEST_SCRIPTS"

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

// library is one build of the function library of every script registered
// so far: its Lua text, its name, and each script's function name by the
// script's SHA-1 (boxed once, for the FCALL argument list).
type library struct {
	name  string
	text  string
	names map[string]any
	ping  string
}

// registry holds every script New made in this process (one library per
// binary: the scripts of every store package that was constructed).
var registry struct {
	mu      sync.Mutex
	entries map[string]*entry
	lib     atomic.Pointer[library] // nil: rebuild
}

// register adds a script to the registry (once per SHA-1). Errors: a
// prelude with a mutable local and no per-call reset (auditPrelude).
func register(name, sha, reader, body string, preludes []string) error {
	for _, p := range preludes {
		if err := auditPrelude(p); err != nil {
			return err
		}
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.entries == nil {
		registry.entries = map[string]*entry{}
	}
	if _, ok := registry.entries[sha]; ok {
		return nil
	}
	registry.entries[sha] = &entry{name: name, sha: sha, reader: reader, preludes: slices.Clone(preludes), body: body,
		ro: !mayWrite(body, preludes)}
	registry.lib.Store(nil)
	return nil
}

// current is the library of every script registered so far.
func current() *library {
	if l := registry.lib.Load(); l != nil {
		return l
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if l := registry.lib.Load(); l != nil {
		return l
	}
	l := build(registry.entries)
	registry.lib.Store(l)
	return l
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

// Library is the Lua source of the function library of every script made
// so far in this process (FUNCTION LOAD's argument) and its name; for
// tests and tools.
func Library() (name, text string) {
	l := current()
	return l.name, l.text
}

// Modes of a client.
const (
	modeUndecided int32 = iota
	modeFunctions
	modeEval
)

// client is one Redis client's script mode and the library loaded on it;
// its hook turns EVALSHA of a registered script into FCALL of its
// function while the mode is modeFunctions.
type client struct {
	rdb  redis.UniversalClient
	log  *slog.Logger
	mode atomic.Int32
	// loaded is the library last loaded on every master (nil: none).
	loaded atomic.Pointer[library]
	mu     sync.Mutex // serialises loads
	// retryAt: after a transient failure of a load, the next one is not
	// tried before it (so a down Redis is not probed on every command).
	retryAt time.Time
	// refused is the last library whose load failed once functions were
	// in use (not tried again; its new scripts go by EVALSHA).
	refused *library
	now     func() time.Time
}

// clients are the attached clients by identity (the redis.UniversalClient
// value Attach was given; Run's Processor and Call.Result's fallback are
// looked up in it).
var clients sync.Map

// Attach makes rdb run the store's scripts as Redis Functions where it
// can: on its first script command, the library of every script made so
// far (Library) is loaded on every master (FUNCTION LOAD; on a Cluster on
// each master) and checked with an FCALL, and from then on each EVALSHA of
// a known script is sent as FCALL of its function, in Run, Queue and Call
// alike (a go-redis hook rewrites the command; its keys and their routing
// are unchanged). Where the load is refused — no FUNCTION command (the
// embedded store, Redis < 7), an ACL without FUNCTION LOAD or FCALL
// (NOPERM), any other error reply — the client keeps the EVALSHA/EVAL
// path for good; a connection-level failure or the caller's context
// ending leaves the choice to a later command (at most one try a second). The mode is logged once on log (nil:
// none). ModeEnv=eval keeps the EVAL path. Attaching a client twice is a
// no-op. Attach adds a hook to rdb, so it must come before rdb is used by
// several goroutines (the store's New, at the composition root).
func Attach(rdb redis.UniversalClient, log *slog.Logger) {
	if rdb == nil {
		return
	}
	if _, ok := clients.Load(rdb); ok {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &client{rdb: rdb, log: log, now: time.Now}
	if _, loaded := clients.LoadOrStore(rdb, c); loaded {
		return
	}
	if os.Getenv(ModeEnv) == "eval" {
		c.mode.Store(modeEval)
		log.Info("redis scripts: EVALSHA/EVAL", "reason", ModeEnv+"=eval")
		return
	}
	rdb.AddHook(c)
}

// UsesFunctions reports whether rdb (as given to Attach) runs the scripts
// as Redis Functions now: false before its first script command, on the
// EVAL path, and for a client never attached.
func UsesFunctions(rdb any) bool {
	c := clientOf(rdb)
	return c != nil && c.mode.Load() == modeFunctions
}

func clientOf(p any) *client {
	if p == nil {
		return nil
	}
	v, ok := clients.Load(p)
	if !ok {
		return nil
	}
	return v.(*client)
}

// DialHook is redis.Hook's; the client's does nothing there.
func (c *client) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook is redis.Hook's: it rewrites a script's EVALSHA as FCALL.
func (c *client) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.rewrite(ctx, cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook is redis.Hook's: ProcessHook for each command of a
// pipeline or transaction.
func (c *client) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.rewrite(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}

// rewrite turns cmd, when it is the EVALSHA of a registered script, into
// the FCALL of its function (same numkeys, keys and arguments, in place),
// loading the library first when it is not loaded yet.
func (c *client) rewrite(ctx context.Context, cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 || args[0] != "evalsha" || c.mode.Load() == modeEval {
		return
	}
	sha, ok := args[1].(string)
	if !ok {
		return
	}
	l := c.loaded.Load()
	if l != nil {
		if fn, ok := l.names[sha]; ok {
			args[0], args[1] = "fcall", fn
			return
		}
	}
	cur := current()
	if _, ok := cur.names[sha]; !ok {
		return // not one of ours: EVALSHA as sent
	}
	if l = c.ensure(ctx, cur); l == nil {
		return
	}
	if fn, ok := l.names[sha]; ok {
		args[0], args[1] = "fcall", fn
	}
}

// ensure loads library cur on the client unless it is loaded, deciding the
// mode on the first load; it returns the library loaded, or nil when the
// command goes the EVALSHA way.
func (c *client) ensure(ctx context.Context, cur *library) *library {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.loaded.Load(); l == cur {
		return l
	}
	mode := c.mode.Load()
	if mode == modeEval {
		return nil
	}
	if c.now().Before(c.retryAt) || c.refused == cur {
		return nil
	}
	err := c.load(ctx, cur)
	switch {
	case err == nil:
		c.loaded.Store(cur)
		if mode == modeUndecided {
			c.mode.Store(modeFunctions)
			c.log.Info("redis scripts: Redis Functions", "library", cur.name, "functions", len(cur.names))
		}
		return cur
	case transient(err):
		c.retryAt = c.now().Add(time.Second)
		return nil
	case mode == modeUndecided:
		c.mode.Store(modeEval)
		c.log.Info("redis scripts: EVALSHA/EVAL", "reason", err.Error())
		return nil
	default:
		c.refused = cur
		c.log.Warn("redis scripts: loading the function library", "library", cur.name, "err", err)
		return nil
	}
}

// transient reports a load failure that says nothing about Redis's
// support for functions: Redis unreachable or busy (Unavailable), or the
// calling request's context ended.
func transient(err error) bool {
	return Unavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// reload loads the library again after a call was answered "Function not
// found" (FUNCTION FLUSH, a restarted Redis without persistence, a
// failover to a node that never got it); it reports whether the retry may
// go as FCALL.
func (c *client) reload(ctx context.Context) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mode.Load() != modeFunctions {
		return false
	}
	cur := current()
	if err := c.load(ctx, cur); err != nil {
		c.log.Warn("redis scripts: reloading the function library", "library", cur.name, "err", err)
		c.loaded.Store(nil)
		return false
	}
	c.loaded.Store(cur)
	return true
}

// load loads l on every master (FUNCTION LOAD; a library of that name
// already there is the same library, its name being its sources' hash)
// and checks that FCALL runs (its ping function).
func (c *client) load(ctx context.Context, l *library) error {
	loadOn := func(ctx context.Context, n redis.Cmdable) error {
		err := n.FunctionLoad(ctx, l.text).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	var err error
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		// ForEachMaster runs the callback on several goroutines at once:
		// the callback shares nothing but the library, read-only.
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return loadOn(ctx, n) })
	} else {
		err = loadOn(ctx, c.rdb)
	}
	if err != nil {
		return err
	}
	return c.rdb.FCall(ctx, l.ping, nil).Err()
}

// funcNotFound reports FCALL's reply for a function the server does not
// have (Redis 7: "ERR Function not found"); it did not run.
func funcNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}
