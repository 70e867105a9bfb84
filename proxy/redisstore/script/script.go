// Package script is the store's one script layer: every Lua script of
// proxy/redisstore has one Go type for its arguments and one for its reply,
// encoded and decoded here, named by field and never by position.
//
// An argument type is a struct whose fields carry a `lua:"name"` tag (a
// value in ARGV) or a `lua:"name,key"` tag (a key in KEYS). Load generates,
// from that struct, the few lines of Lua that open the script and read KEYS
// and ARGV into two tables, K and A, so the script says K.record and
// A.lease_ms where it would have said KEYS[1] and ARGV[17]:
//
//	type claimArgs struct {
//		Due   string   `lua:"due,key"`
//		Lease string   `lua:"lease,key"`
//		Batch int      `lua:"batch"`
//		IDs   []string `lua:"ids"`
//	}
//
// opens the script with
//
//	local K, A = {}, {}
//	K.due = KEYS[1]; K.lease = KEYS[2]; A.batch = tonumber(ARGV[1]); A.ids = {…ARGV[3..]…}
//
// Field types: string and []byte (Lua strings), bool ('1' or '0' on the
// wire, a Lua boolean in A), the integer kinds and float64 (Lua numbers;
// integers are sent in decimal, never in exponent form), time.Duration
// (whole milliseconds), []string, and a slice of a struct of those kinds
// (one level), which becomes a Lua array of tables. A slice is sent as its
// length followed by its items, so any number of slices may follow each
// other. Keys inside a slice's elements go to KEYS in order.
//
// A reply type is a struct with `lua:"name"` tags too. A script answers a
// flat array of name/value pairs, {'state', 'scheduled', 'attempts', 3};
// a slice-of-struct field's value is an array of such arrays, and a struct
// field's value is one. Names the reply type does not declare are an error
// (a script and its type that drift apart fail the tests, not production).
// Integers decode into integer, float and bool fields (0 is false), strings
// into string, []byte, integer and float fields; a Lua false or a missing
// name leaves the zero value. A script that answers a bare nil (false)
// decodes as the zero reply.
//
// Two ways to run. Attach makes a client's Functions, at the composition
// root (the store's New; every store package on that client is handed it
// and registers its scripts with it in its constructor: New, Load and
// LoadInto take it). On Redis 7 or later the scripts registered with it
// run as Redis Functions: they make one library per client
// (Functions.Library: named cp_ and a hash of its text, the preludes
// defined once per group of scripts that share them, each script a
// function whose callback is its reader and body), built and loaded with
// FUNCTION LOAD on the client's first script command (on a Cluster on
// every master; a script registered after it stays out, on EVALSHA), and
// each script in it is sent as FCALL of its function (its command built by
// the Script from its Functions' mode: the keys and arguments of its
// EVALSHA), so Redis no longer re-evaluates the reader and the preludes on
// every call. The package has no state of its own: two clients have two
// Functions, each with its library and mode.
// A function library keeps its top-level locals from one FCALL to the
// next, so a prelude's mutable local is reset at the start of every call
// by a "--@per-call <statement>" line (Clock's clock_now, lib.lua's
// gate_dirty), and New refuses a prelude whose flag-like local has none.
// "Function not found" (FUNCTION FLUSH, a restart without persistence, a
// failover) loads the library again — one load per client however many
// calls met it — and retries the call once, in Run and in Call.Result
// (Missing tells a pipeline's caller that Result will). A reload that
// fails (OOM under maxmemory, BUSY, Redis down) sends the scripts by
// EVALSHA meanwhile and is tried again at most once a second; only the
// first load's refusal, or NOPERM, keeps the EVAL path for good.
// Everywhere else — miniredis and Redis < 7 (no FUNCTION), an ACL that
// refuses FUNCTION LOAD or FCALL, a Functions made by AttachEval (tests),
// a script registered with no Functions (nil) — Run uses EVALSHA and falls
// back to EVAL on NOSCRIPT, as go-redis's Script.Run does, so a flushed or
// restarted Redis costs one round trip more, never an error. Queue and
// Call do the same inside a pipeline.
//
// The library is one per client AND set of scripts: its name is a hash of
// its text, so two binaries, or two replicas of one binary with different
// features configured (Salesforce's scripts registered or not), load two
// libraries side by side, each used by its own replicas only. The start
// log line "redis scripts: Redis Functions" names a replica's library;
// FUNCTION LIST lists them all. Deleting one (FUNCTION DELETE) is
// recoverable: its replicas load it again on their next call.
// docs/performance.md "Redis Functions" has the flags, the figures and the
// audit; docs/operating.md the ACL a Redis user needs.
package script

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

// Clock is a prelude every store script loads before its own helpers: the
// Lua function clock(pinned), which returns the time of shared state in Unix
// ms — Redis's own (TIME; allowed before writes since Redis 7 replicates a
// script's effects, not the script) — unless the caller pinned it: pinned > 0
// is a test clock's now (the store's PinScriptTime option, set only by tests
// that travel in time). TIME is read once per script run, so every item of
// one call sees one now. Redis's clock is the one clock of shared state
// (contract §1, ARCHITECTURE.md "One clock"): scripts take now from clock
// and replicas pass durations, never instants.
const Clock = `local clock_now = nil
--@per-call clock_now = nil
local function clock(pinned)
  local p = tonumber(pinned) or 0
  if p > 0 then return p end
  if not clock_now then
    local t = redis.call('TIME')
    clock_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return clock_now
end`

// Numbers is a prelude of the two number helpers the store's lib.lua
// files build on, loaded after Clock: str(n) formats an integral number as
// a decimal string for a Redis argument or field (never in exponent form,
// as 1.7e+12 would be), and num(v) converts a reply value to a number
// (absent or empty: 0).
const Numbers = `local function str(n)
  return string.format('%d', n)
end

local function num(v)
  if not v or v == '' then return 0 end
  return tonumber(v)
end`

// Script is one loaded Lua script with argument type A and reply type R
// (see the package comment for the tags and the field types). It is safe
// for concurrent use.
type Script[A, R any] struct {
	name  string
	fns   *Functions // registered with (nil: none, the EVAL path)
	src   string
	sha   any // the source's SHA-1 (EVALSHA) and the source (EVAL), boxed once
	body  any
	args  *argCodec
	reply *replyCodec
}

// Load reads lua/<name>.lua from fsys and returns it as a Script whose
// source is the generated reader of A's KEYS and ARGV, then each prelude
// in order (the shared helpers, e.g. lib.lua), then the file, registered
// with f (it joins f's function library; nil: no library, the script
// always goes by EVALSHA/EVAL). It returns an error when the file is
// missing, when A or R is not a struct of the supported field types, or
// when a prelude has a mutable local without a --@per-call reset.
func Load[A, R any](f *Functions, fsys fs.FS, name string, prelude ...string) (*Script[A, R], error) {
	body, err := fs.ReadFile(fsys, "lua/"+name+".lua")
	if err != nil {
		return nil, fmt.Errorf("script %s: %w", name, err)
	}
	return New[A, R](f, name, string(body), prelude...)
}

// LoadInto is Load into *dst, the one way a store package loads its
// scripts (in one errors.Join): lua/<name>.lua of the package's
// Package.FS, composed with its Package.Prelude and registered with its
// Package.Functions. Errors as Load.
func LoadInto[A, R any](dst **Script[A, R], p Package, name string) error {
	sc, err := Load[A, R](p.Functions, p.FS, name, p.Prelude...)
	*dst = sc
	return err
}

// Package is what a store package's scripts are loaded from and into
// (LoadInto): its embedded lua/ directory, the preludes each of its
// scripts is composed with, in order, and the Functions of its client.
type Package struct {
	FS        fs.FS
	Prelude   []string
	Functions *Functions
}

// Lib is script.Numbers then fsys's lua/lib.lua, the prelude that the
// core's, the jobs' and the dead letters' scripts are composed with after
// Clock. Errors: lib.lua missing.
func Lib(fsys fs.FS) (string, error) {
	b, err := fs.ReadFile(fsys, "lua/lib.lua")
	if err != nil {
		return "", err
	}
	return Numbers + "\n" + string(b), nil
}

// New is Load with the script's body given: the source run is the reader
// of A, then the preludes, then body. Errors as Load.
func New[A, R any](f *Functions, name, body string, prelude ...string) (*Script[A, R], error) {
	ac, err := argCodecOf(reflect.TypeFor[A]())
	if err != nil {
		return nil, fmt.Errorf("script %s: arguments: %w", name, err)
	}
	rc, err := replyCodecOf(reflect.TypeFor[R]())
	if err != nil {
		return nil, fmt.Errorf("script %s: reply: %w", name, err)
	}
	var src strings.Builder
	src.WriteString(ac.lua)
	for _, p := range prelude {
		src.WriteString("\n")
		src.WriteString(p)
	}
	src.WriteString("\n")
	src.WriteString(body)
	if err := audit(f, prelude); err != nil {
		return nil, fmt.Errorf("script %s: %w", name, err)
	}
	sha := redis.NewScript(src.String()).Hash()
	if f != nil {
		f.register(name, sha, ac.lua, body, prelude)
	}
	return &Script[A, R]{name: name, fns: f, src: src.String(), sha: sha, body: src.String(),
		args: ac, reply: rc}, nil
}

// audit is auditPrelude of each prelude: through f, which checks each
// text once, when there is one. Errors: auditPrelude's.
func audit(f *Functions, preludes []string) error {
	if f != nil {
		return f.audit(preludes)
	}
	for _, p := range preludes {
		if err := auditPrelude(p); err != nil {
			return err
		}
	}
	return nil
}

// Name is the script's name (its file name without .lua).
func (s *Script[A, R]) Name() string { return s.name }

// Source is the whole Lua source EVAL runs (reader, preludes, body).
func (s *Script[A, R]) Source() string { return s.src }

// SHA is the SHA-1 of Source in hex, EVALSHA's argument.
func (s *Script[A, R]) SHA() string { return s.sha.(string) }

// Function is the script's function name in its Functions' library
// (Library, which it builds when it is not built yet), FCALL's argument
// on a client that uses functions; "" for a script registered with none,
// or after the library was built.
func (s *Script[A, R]) Function() string {
	if s.fns == nil {
		return ""
	}
	fn, _ := s.fns.library().names[s.SHA()].(string)
	return fn
}

// Encode returns the KEYS and ARGV that a runs the script with. Callers
// need it only to run the script outside Run and Queue (tests, benchmarks).
func (s *Script[A, R]) Encode(a *A) (keys []string, argv []any) {
	return s.args.encode(reflect.ValueOf(a).Elem())
}

// Processor runs or queues one command: a client (single node or cluster)
// runs it, a pipeline queues it.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run runs the script with a on c (its Functions' client, or another
// client of that Redis: the library is loaded through the Functions') and
// decodes its reply; a's strings travel by pointer (no copy), so a must
// not change until Run returns. Errors: Redis's (connection, NOSCRIPT
// twice, a script error raised with error_reply), and a reply that does
// not match R.
func (s *Script[A, R]) Run(ctx context.Context, c Processor, a *A) (R, error) {
	keys, args := s.args.command(reflect.ValueOf(a).Elem())
	cmd := s.command(ctx, false, len(keys), args)
	gen := s.fns.generation()
	_ = c.Process(ctx, cmd)
	v, err := cmd.Result()
	if funcNotFound(err) {
		v, err = s.again(ctx, c, gen, len(keys), args)
	} else if noScript(err) {
		cmd = s.command(ctx, true, len(keys), args)
		_ = c.Process(ctx, cmd)
		v, err = cmd.Result()
	}
	return s.decode(v, err)
}

// again runs a call again on c after Redis answered "Function not found"
// (it did not run) to the call sent at the Functions' generation gen: the
// script's Functions loads its library again, unless a load was tried
// since gen, and the call is retried once as FCALL; when the library is
// not loaded, or the retry meets the same answer, the call goes as EVAL of
// the source, which always runs.
func (s *Script[A, R]) again(ctx context.Context, c Processor, gen uint64, nkeys int, args []any) (any, error) {
	if s.fns != nil && s.fns.reload(ctx, gen) {
		cmd := s.command(ctx, false, nkeys, args)
		_ = c.Process(ctx, cmd)
		v, err := cmd.Result()
		if !funcNotFound(err) {
			return v, err
		}
	}
	cmd := s.command(ctx, true, nkeys, args)
	_ = c.Process(ctx, cmd)
	return cmd.Result()
}

// Queue adds a run of the script with a to the pipeline p (FCALL or
// EVALSHA, as Run sends it; a due load of the library runs now); read
// its reply with the returned Call's Result after p has been executed. a's
// strings travel by pointer (no copy), so a must not change until Result
// has returned (its NOSCRIPT fallback sends them again).
func (s *Script[A, R]) Queue(ctx context.Context, p redis.Pipeliner, a *A) *Call[A, R] {
	keys, args := s.args.command(reflect.ValueOf(a).Elem())
	cmd := s.command(ctx, false, len(keys), args)
	_ = p.Process(ctx, cmd)
	return &Call[A, R]{s: s, keys: keys, args: args, cmd: cmd, gen: s.fns.generation()}
}

// command is the script's command for the argument list args that
// argCodec.command built (nkeys keys), its commandHead slots filled in:
// FCALL of its function when its Functions' library is loaded (loading it
// first when a load is due: Functions.function), else EVALSHA; eval: EVAL
// of the source. One list, where go-redis's Script.EvalSha would copy ARGV
// into a second one and box every key; a key travels as a pointer into
// the keys, which go-redis writes, and routes on a cluster, as the string
// (the first key is the fourth argument of all three). The EVAL of the
// NOSCRIPT fallback fills a copy, so the first command's arguments stay
// as they were sent.
func (s *Script[A, R]) command(ctx context.Context, eval bool, nkeys int, args []any) *redis.Cmd {
	if eval {
		args = slices.Clone(args)
		args[0], args[1] = "eval", s.body
	} else if fn := s.fns.function(ctx, s.SHA()); fn != nil {
		args[0], args[1] = "fcall", fn
	} else {
		args[0], args[1] = "evalsha", s.sha
	}
	args[2] = nkeys
	cmd := redis.NewCmd(ctx, args...)
	if nkeys > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// noScript reports a NOSCRIPT reply: Redis does not know the script (a
// flushed or restarted server); it did not run.
func noScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// decode turns a script's reply into R; redis.Nil is the zero reply.
func (s *Script[A, R]) decode(v any, err error) (R, error) {
	var r R
	if errors.Is(err, redis.Nil) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if v == nil {
		return r, nil
	}
	if err := s.reply.decode(v, reflect.ValueOf(&r).Elem()); err != nil {
		return r, fmt.Errorf("script %s: reply: %w", s.name, err)
	}
	return r, nil
}

// Call is one run of a Script queued in a pipeline.
type Call[A, R any] struct {
	s    *Script[A, R]
	keys []string // args' keys point into it
	args []any
	cmd  *redis.Cmd
	gen  uint64 // the Functions' generation when queued (again)
}

// Result is the call's decoded reply once its pipeline has run. A script
// Redis did not know (NOSCRIPT: flushed or restarted; "Function not found":
// the library lost; it did not run) is run again on fallback, as Run does;
// so the pipeline's own error is to be read with Missing. Errors as
// Script.Run.
func (c *Call[A, R]) Result(ctx context.Context, fallback Processor) (R, error) {
	v, err := c.cmd.Result()
	if funcNotFound(err) {
		v, err = c.s.again(ctx, fallback, c.gen, len(c.keys), c.args)
	} else if noScript(err) {
		cmd := c.s.command(ctx, true, len(c.keys), c.args)
		_ = fallback.Process(ctx, cmd)
		v, err = cmd.Result()
	}
	return c.s.decode(v, err)
}

// Err is the call's Redis error as the pipeline returned it (NOSCRIPT
// included), without running anything again.
func (c *Call[A, R]) Err() error { return c.cmd.Err() }

// Wrap turns a Redis error into a store error for the operation op (say
// "redisstore: claim"): connection-level failures (network errors, EOF, a
// closed client, pool or deadline timeouts, and the LOADING, CLUSTERDOWN,
// MASTERDOWN, TRYAGAIN and READONLY replies) wrap policy.ErrUnavailable,
// which the HTTP layer answers with 503 store-unavailable (contract §11);
// context cancellation, redis.Nil and script or reply errors are wrapped as
// they are. nil stays nil. Every store package (the core, the outbox, replay
// jobs, the gate cache) classifies errors through it.
func Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if Unavailable(err) {
		return fmt.Errorf("%s: %w: %w", op, policy.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Unavailable reports whether err means Redis could not be reached or
// could not serve the command now (Wrap's rule).
func Unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, redis.Nil) {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		return redis.IsLoadingError(err) || redis.IsClusterDownError(err) ||
			redis.IsMasterDownError(err) || redis.IsTryAgainError(err) || redis.IsReadOnlyError(err)
	}
	return true
}
