package script

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// wantFunctions reports whether backend b must run the scripts as
// functions once attached: a real Redis (7 or later), in a build without
// the tag scripts_eval.
func wantFunctions(b redistest.Backend) bool {
	return b.Real() && !evalOnly
}

// onEveryMaster runs f on b's one node or on each master of its cluster.
func onEveryMaster(t *testing.T, b redistest.Backend, f func(c *redis.Client) error) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := b.Client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return f(c) })
	} else {
		err = f(b.Client.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
}

type clockArgs struct {
	Key    string `lua:"key,key"`
	Pinned int64  `lua:"pinned"`
}

type clockReply struct {
	Before int64 `lua:"before"`
	Now    int64 `lua:"now"`
	Count  int64 `lua:"count"`
}

// clockBody reads the prelude's clock_now before clock sets it: a fresh
// chunk (EVAL) or a reset (FCALL) both show it unset.
const clockBody = `local before = clock_now or 0
local now = clock(A.pinned)
return {'before', before, 'now', now, 'count', redis.call('INCR', K.key)}`

// TestFunctionsRunLikeEval: a script attached clients run answers as the
// EVAL path does — FCALL on real Redis (the mode is checked), EVAL on
// miniredis — and the clock's module-level now never leaks from one call
// into the next (Clock's --@per-call reset; without it the second call's
// before is the first call's now).
func TestFunctionsRunLikeEval(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			f := Attach(b.Client, nil)
			s, err := New[clockArgs, clockReply](f, "clock_probe", clockBody, Clock, Numbers)
			if err != nil {
				t.Fatal(err)
			}
			first, err := s.Run(ctx, b.Client, &clockArgs{Key: "{t}n"})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.UsesFunctions(); got != wantFunctions(b) {
				t.Fatalf("UsesFunctions = %v, want %v", got, wantFunctions(b))
			}
			second, err := s.Run(ctx, b.Client, &clockArgs{Key: "{t}n", Pinned: 1234})
			if err != nil {
				t.Fatal(err)
			}
			third, err := s.Run(ctx, b.Client, &clockArgs{Key: "{t}n"})
			if err != nil {
				t.Fatal(err)
			}
			if first.Before != 0 || second.Before != 0 || third.Before != 0 {
				t.Fatalf("clock_now before each call = %d, %d, %d; want 0 (reset per call)", first.Before, second.Before, third.Before)
			}
			if second.Now != 1234 || first.Now < 1_700_000_000_000 || third.Now < first.Now {
				t.Fatalf("now = %d, %d, %d; want real, 1234 (pinned), real again", first.Now, second.Now, third.Now)
			}
			// The same script registered with no Functions: EVALSHA/EVAL, the
			// same reply but for the time.
			es, err := New[clockArgs, clockReply](nil, "clock_probe", clockBody, Clock, Numbers)
			if err != nil {
				t.Fatal(err)
			}
			viaEval, err := es.Run(ctx, b.Client, &clockArgs{Key: "{t}n", Pinned: 1234})
			if err != nil {
				t.Fatal(err)
			}
			second.Count = third.Count + 1
			if !reflect.DeepEqual(viaEval, second) {
				t.Fatalf("EVAL path = %+v, want %+v", viaEval, second)
			}
		})
	}
}

// TestFCALLIsEVALSHAsCommand: a script run as a function, by Run and in a
// pipeline, sends one FCALL with the EVALSHA's numkeys, keys and
// arguments (so a Cluster routes it by the same first key), and the EVAL
// path sends that EVALSHA: the two differ in their first two arguments
// only.
func TestFCALLIsEVALSHAsCommand(t *testing.T) {
	for _, b := range functionBackends(t, false) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			eval := plainClient(t, b)
			for c, f := range map[redis.UniversalClient]*Functions{b.Client: Attach(b.Client, nil), eval: AttachEval(eval, nil)} {
				s, err := New[incArgs, incReply](f, "inc_shape", `return {'n', redis.call('INCRBY', K.key, A.by)}`)
				if err != nil {
					t.Fatal(err)
				}
				head := "fcall " + s.Function()
				if c == eval {
					head = "evalsha " + s.SHA()
				}
				_ = c.ScriptLoad(ctx, s.Source()).Err()                         // no NOSCRIPT on the EVAL path
				if _, err := s.Run(ctx, c, &incArgs{Key: "{t}n"}); err != nil { // the library loaded
					t.Fatal(err)
				}
				h := &argsHook{}
				c.AddHook(h)
				if _, err := s.Run(ctx, c, &incArgs{Key: "{t}n", By: 5}); err != nil {
					t.Fatal(err)
				}
				queueIncs(t, ctx, c, s)
				want := []string{head + " 1 {t}n 5", head + " 1 {t}n 1", head + " 1 {t}n 2", head + " 1 {t}n 3"}
				if strings.Join(h.sent, "\n") != strings.Join(want, "\n") {
					t.Errorf("sent %q, want %q", h.sent, want)
				}
			}
		})
	}
}

// argsHook records each script command (FCALL, EVALSHA, EVAL) its client
// sends, its arguments joined by spaces (a key sent by pointer as the
// string).
type argsHook struct {
	mu   sync.Mutex
	sent []string
}

func (h *argsHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *argsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.add(cmd); return next(ctx, cmd) }
}

func (h *argsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.add(c)
		}
		return next(ctx, cmds)
	}
}

func (h *argsHook) add(cmd redis.Cmder) {
	if n := cmd.Name(); n != "fcall" && n != "evalsha" && n != "eval" {
		return
	}
	parts := make([]string, len(cmd.Args()))
	for i, a := range cmd.Args() {
		if p, ok := a.(*string); ok {
			a = *p
		}
		parts[i] = fmt.Sprint(a)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = append(h.sent, strings.Join(parts, " "))
}

// plainClient is a second client on b (for a Functions of its own).
func plainClient(t *testing.T, b redistest.Backend) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch x := b.Client.(type) {
	case *redis.ClusterClient:
		c = redis.NewClusterClient(x.Options())
	case *redis.Client:
		c = redis.NewClient(x.Options())
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestFunctionNotFoundLoadsAgain: after FUNCTION FLUSH (a restarted Redis
// without persistence, a failover to a node that never got the library)
// Run and a pipeline's Call.Result load the library again and retry once,
// nothing lost nor run twice, and the client stays on FCALL.
func TestFunctionNotFoundLoadsAgain(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		if !b.Real() {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			f := Attach(b.Client, nil)
			s, err := New[incArgs, incReply](f, "inc_fn", `return {'n', redis.call('INCRBY', K.key, A.by)}`)
			if err != nil {
				t.Fatal(err)
			}
			flush := func() {
				onEveryMaster(t, b, func(c *redis.Client) error { return c.FunctionFlush(ctx).Err() })
			}
			run := func() []int64 { return queueIncs(t, ctx, b.Client, s) }
			if r, err := s.Run(ctx, b.Client, &incArgs{Key: "{t}n", By: 1}); err != nil || r.N != 1 {
				t.Fatalf("first run = %+v, %v", r, err)
			}
			flush()
			if r, err := s.Run(ctx, b.Client, &incArgs{Key: "{t}n", By: 1}); err != nil || r.N != 2 {
				t.Fatalf("run after FUNCTION FLUSH = %+v, %v; want n=2", r, err)
			}
			flush()
			if got := run(); got[0] != 3 || got[1] != 5 || got[2] != 8 {
				t.Fatalf("pipeline after FUNCTION FLUSH = %v, want [3 5 8]", got)
			}
			if got := f.UsesFunctions(); got != wantFunctions(b) {
				t.Fatalf("UsesFunctions = %v, want %v", got, wantFunctions(b))
			}
			if !wantFunctions(b) {
				return
			}
			name, _ := f.Library()
			onEveryMaster(t, b, func(c *redis.Client) error {
				libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: name}).Result()
				if err == nil && len(libs) != 1 {
					t.Errorf("%s: libraries named %s = %d, want 1 (loaded again)", c, name, len(libs))
				}
				return err
			})
		})
	}
}

// TestRefusedFunctionsFallBackToEval: an ACL user without FUNCTION (or
// without FCALL) still runs every script, by EVALSHA/EVAL, and so does a
// client attached by AttachEval and miniredis (no FUNCTION command).
func TestRefusedFunctionsFallBackToEval(t *testing.T) {
	// get is the script registered with a Functions attached to c.
	get := func(t *testing.T, c redis.UniversalClient) (*Functions, *Script[readArgs, readReply]) {
		f := Attach(c, nil)
		s, err := New[readArgs, readReply](f, "get_fn", `return {'v', redis.call('GET', K.key) or 'none'}`)
		if err != nil {
			t.Fatal(err)
		}
		return f, s
	}
	ctx := context.Background()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			if !b.Real() {
				f, s := get(t, b.Client)
				if r, err := s.Run(ctx, b.Client, &readArgs{Key: "{t}k"}); err != nil || r.V != "none" {
					t.Fatalf("miniredis: %+v, %v", r, err)
				}
				if f.UsesFunctions() {
					t.Fatal("miniredis: UsesFunctions = true")
				}
				return
			}
			if b.Cluster() {
				t.Skip("the ACL users are made on the single node")
			}
			for _, rule := range []string{"-function", "-fcall"} {
				user := "cp_test_no" + strings.TrimPrefix(rule, "-")
				c := aclClient(t, b.Client, user, "+@all", rule)
				f, s := get(t, c)
				if r, err := s.Run(ctx, c, &readArgs{Key: "{t}k"}); err != nil || r.V != "none" {
					t.Fatalf("ACL %s: %+v, %v", rule, r, err)
				}
				if f.UsesFunctions() {
					t.Fatalf("ACL %s: UsesFunctions = true", rule)
				}
			}
			c := plainClient(t, b)
			f := AttachEval(c, nil)
			s, err := New[readArgs, readReply](f, "get_fn", `return {'v', redis.call('GET', K.key) or 'none'}`)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := s.Run(ctx, c, &readArgs{Key: "{t}k"}); err != nil || r.V != "none" {
				t.Fatalf("AttachEval: %+v, %v", r, err)
			}
			if f.UsesFunctions() {
				t.Fatal("AttachEval: UsesFunctions = true")
			}
		})
	}
}

// TestAuditRefusesAMutableLocal: a prelude's module-level flag without a
// per-call reset would leak from one FCALL into the next; New refuses it.
func TestAuditRefusesAMutableLocal(t *testing.T) {
	type none struct{}
	if _, err := New[none, none](nil, "leaky", "return false", "local dirty = false\nlocal function f() dirty = true end"); err == nil ||
		!strings.Contains(err.Error(), "dirty") {
		t.Fatalf("New with a mutable prelude local = %v, want an error naming it", err)
	}
	if _, err := New[none, none](nil, "reset", "return false", "local dirty = false\n--@per-call dirty = false\nlocal limit = 3\nlocal names = {'a'}"); err != nil {
		t.Fatalf("New with a reset flag and constants = %v", err)
	}
}

// TestNoWritesOnlyForReadingScripts: the flag no-writes goes to a script
// whose body and the prelude functions it calls only read.
func TestNoWritesOnlyForReadingScripts(t *testing.T) {
	pre := "local function rd(k) return redis.call('GET', k) end\nlocal function wr(k) redis.call('SET', k, 1) end\nlocal function via(k) return wr(k) end"
	for body, want := range map[string]bool{
		"return rd(K.k)":                      false,
		"return via(K.k)":                     true,
		"return redis.call('HSET', K.k, 1)":   true,
		"local c = 'DEL'; redis.call(c, K.k)": true,
		"-- wr(K.k) in a comment\nreturn 1":   false,
	} {
		if got := mayWrite(body, []string{pre}); got != want {
			t.Errorf("mayWrite(%q) = %v, want %v", body, got, want)
		}
	}
}

// TestCanceledFirstLoadDecidesNothing: a first script call whose context
// has ended neither picks the EVAL path for good nor blocks the next calls
// on a load; a call after the retry delay loads the library.
func TestCanceledFirstLoadDecidesNothing(t *testing.T) {
	type none struct{}
	for _, b := range redistest.Backends(t) {
		if !wantFunctions(b) {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			cl := Attach(b.Client, nil)
			s, err := New[none, none](cl, "noop_fn", "return false")
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(1_700_000_000, 0)
			cl.now = func() time.Time { return now }
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := s.Run(ended, b.Client, &none{}); err == nil {
				t.Fatal("a run with an ended context succeeded")
			}
			if m := cl.mode.Load(); m != modeUndecided {
				t.Fatalf("mode after a canceled first load = %d, want undecided", m)
			}
			if _, err := s.Run(context.Background(), b.Client, &none{}); err != nil {
				t.Fatal(err)
			}
			if cl.UsesFunctions() {
				t.Fatal("loaded again within the retry delay")
			}
			now = now.Add(time.Second)
			if _, err := s.Run(context.Background(), b.Client, &none{}); err != nil {
				t.Fatal(err)
			}
			if !cl.UsesFunctions() {
				t.Fatal("not loaded after the retry delay")
			}
		})
	}
}

// TestTwoClientsTwoLibraries: two clients in one process, each with its
// own Functions, have a library and a mode each — one kept on EVAL
// (AttachEval), one on functions where Redis has them —
// and a library holds its own Functions' scripts only, none of the other's
// nor of any other test's (with one library per process it held them all).
func TestTwoClientsTwoLibraries(t *testing.T) {
	type none struct{}
	type nReply struct {
		N int64 `lua:"n"`
	}
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			want := wantFunctions(b)
			fa := Attach(b.Client, nil)
			a, err := New[none, nReply](fa, "only_a", "return {'n', 1}")
			if err != nil {
				t.Fatal(err)
			}
			c := plainClient(t, b)
			fb := AttachEval(c, nil)
			bs, err := New[none, nReply](fb, "only_b", "return {'n', 2}")
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range []struct {
				s    *Script[none, nReply]
				on   redis.UniversalClient
				want int64
			}{{a, b.Client, 1}, {bs, c, 2}} {
				if r, err := run.s.Run(ctx, run.on, &none{}); err != nil || r.N != run.want {
					t.Fatalf("%s = %+v, %v; want n %d", run.s.Name(), r, err, run.want)
				}
			}
			if fa.UsesFunctions() != want || fb.UsesFunctions() {
				t.Fatalf("UsesFunctions = %v (a), %v (b); want %v, false", fa.UsesFunctions(), fb.UsesFunctions(), want)
			}
			nameA, textA := fa.Library()
			nameB, textB := fb.Library()
			if nameA == nameB {
				t.Fatalf("both libraries are %s", nameA)
			}
			for _, l := range []struct{ text, has, hasNot string }{{textA, "only_a", "only_b"}, {textB, "only_b", "only_a"}} {
				// one function for the script, one ping
				if n := strings.Count(l.text, "redis.register_function"); n != 2 || !strings.Contains(l.text, l.has) ||
					strings.Contains(l.text, l.hasNot) {
					t.Errorf("library of %s: %d functions, has %s: %v, has %s: %v; want 2, true, false",
						l.has, n, l.has, strings.Contains(l.text, l.has), l.hasNot, strings.Contains(l.text, l.hasNot))
				}
			}
		})
	}
}

// TestOneLibraryPerClient: a script registered after the client's first
// script command is left out of the library (no second library is built
// nor loaded) and runs by EVALSHA/EVAL, with the same reply.
func TestOneLibraryPerClient(t *testing.T) {
	type none struct{}
	type nReply struct {
		N int64 `lua:"n"`
	}
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			f := Attach(b.Client, nil)
			first, err := New[none, nReply](f, "first", "return {'n', 1}")
			if err != nil {
				t.Fatal(err)
			}
			if r, err := first.Run(ctx, b.Client, &none{}); err != nil || r.N != 1 {
				t.Fatalf("first = %+v, %v", r, err)
			}
			name, text := f.Library()
			late, err := New[none, nReply](f, "late", "return {'n', 2}")
			if err != nil {
				t.Fatal(err)
			}
			if r, err := late.Run(ctx, b.Client, &none{}); err != nil || r.N != 2 {
				t.Fatalf("late = %+v, %v", r, err)
			}
			if n, tx := f.Library(); n != name || tx != text || late.Function() != "" || first.Function() == "" {
				t.Fatalf("library %s -> %s, late's function %q, first's %q; want one library, late by EVALSHA",
					name, n, late.Function(), first.Function())
			}
			if got := f.UsesFunctions(); got != wantFunctions(b) {
				t.Fatalf("UsesFunctions = %v, want %v", got, wantFunctions(b))
			}
		})
	}
}

// aclClient makes the Redis user user (password pw, every key and
// channel) with the ACL rules given, deleted at the test's end, and
// returns a client of rdb's server logged in as it.
func aclClient(t *testing.T, rdb redis.UniversalClient, user string, rules ...string) *redis.Client {
	t.Helper()
	ctx := context.Background()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "&*"}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Do(ctx, "ACL", "DELUSER", user) })
	opt := rdb.(*redis.Client).Options()
	opt.Username, opt.Password = user, "pw"
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestEvalReasonIsShort: the reason logged when a client takes the EVAL
// path is at most maxReason bytes: miniredis (no FUNCTION command) repeats
// the whole FUNCTION LOAD in its error, the library's Lua included.
func TestEvalReasonIsShort(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		if b.Real() {
			continue
		}
		var logs logBuffer
		f := Attach(b.Client, slog.New(slog.NewTextHandler(&logs, nil)))
		s, err := New[readArgs, readReply](f, "padded_fn", strings.Repeat("-- a long library\n", 2000)+`return {'v', 'x'}`)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := s.Run(context.Background(), b.Client, &readArgs{Key: "{t}k"}); err != nil || r.V != "x" {
			t.Fatalf("run: %+v, %v", r, err)
		}
		line := logs.String()
		if !strings.Contains(line, "redis scripts: EVALSHA/EVAL") || len(line) > maxReason+200 {
			t.Fatalf("the EVAL path's log line is %d bytes, want at most %d: %.300s", len(line), maxReason+200, line)
		}
	}
}
