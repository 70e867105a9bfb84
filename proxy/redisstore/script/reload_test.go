package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/redis/go-redis/v9"
)

type incArgs struct {
	Key string `lua:"key,key"`
	By  int64  `lua:"by"`
}

type incReply struct {
	N int64 `lua:"n"`
}

type readArgs struct {
	Key string `lua:"key,key"`
}

type readReply struct {
	V string `lua:"v"`
}

// logBuffer is a log sink safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// functionBackends are b's backends that run the scripts as functions
// (wantFunctions); single: the single node only (CONFIG SET, ACL).
func functionBackends(t *testing.T, single bool) []redistest.Backend {
	t.Helper()
	var out []redistest.Backend
	for _, b := range redistest.Backends(t) {
		if wantFunctions(b) && (!single || !b.Cluster()) {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		t.Skip("needs a real Redis with functions (and a build without the tag scripts_eval)")
	}
	return out
}

// commandCalls is the sum over b's masters of INFO commandstats' calls
// and rejected_calls (refused before running: -OOM) of cmd, as Redis
// names it ("fcall", "evalsha", "function|load").
func commandCalls(t *testing.T, b redistest.Backend, cmd string) int64 {
	t.Helper()
	var n atomic.Int64
	onEveryMaster(t, b, func(c *redis.Client) error {
		info, err := c.Info(context.Background(), "commandstats").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
			if !ok {
				continue
			}
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				if k != "calls" && k != "rejected_calls" {
					continue
				}
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return err
				}
				n.Add(x)
			}
		}
		return nil
	})
	return n.Load()
}

// masters is the number of b's masters.
func masters(t *testing.T, b redistest.Backend) int64 {
	var n atomic.Int64
	onEveryMaster(t, b, func(*redis.Client) error { n.Add(1); return nil })
	return n.Load()
}

func flushFunctions(t *testing.T, b redistest.Backend) {
	t.Helper()
	onEveryMaster(t, b, func(c *redis.Client) error { return c.FunctionFlush(context.Background()).Err() })
}

func resetStats(t *testing.T, b redistest.Backend) {
	t.Helper()
	onEveryMaster(t, b, func(c *redis.Client) error { return c.ConfigResetStat(context.Background()).Err() })
}

// TestMissing: a pipeline's error that says a script was not there
// (NOSCRIPT, "Function not found") is Missing, and nothing else is.
func TestMissing(t *testing.T) {
	for err, want := range map[error]bool{
		nil:                                    false,
		redis.Nil:                              false,
		errors.New("ERR Function not found"):   true,
		redis.ErrNoScript:                      true,
		fmt.Errorf("x: %w", redis.ErrNoScript): true,
		errors.New("OOM command not allowed"):  false,
		context.Canceled:                       false,
	} {
		if got := Missing(err); got != want {
			t.Errorf("Missing(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestReloadFailureIsTransient: a reload refused by an out-of-memory Redis
// (FUNCTION LOAD is denied under maxmemory; FUNCTION FLUSH, then calls)
// sends the calls by EVALSHA, tries no load within a second of the failed
// one, and loads the library again, once, when one is due after memory is
// back: FCALL again and a log line that says so. (It used to turn
// functions off until a restart.)
func TestReloadFailureIsTransient(t *testing.T) {
	for _, b := range functionBackends(t, true) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			var logs logBuffer
			f := Attach(b.Client, slog.New(slog.NewTextHandler(&logs, nil)))
			now := time.Unix(1_700_000_000, 0)
			f.now = func() time.Time { return now }
			s, err := New[readArgs, readReply](f, "read_oom", `return {'v', redis.call('GET', K.key) or 'none'}`)
			if err != nil {
				t.Fatal(err)
			}
			run := func(when string) {
				t.Helper()
				if r, err := s.Run(ctx, b.Client, &readArgs{Key: "{t}k"}); err != nil || r.V != "none" {
					t.Fatalf("%s: %+v, %v", when, r, err)
				}
			}
			run("first call")
			if !f.UsesFunctions() {
				t.Fatal("not on functions after the first call")
			}
			c := b.Client.(*redis.Client)
			if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.ConfigSet(ctx, "maxmemory", "0") })
			flushFunctions(t, b)
			resetStats(t, b)
			run("the call that meets the lost library, under OOM")
			run("a call within the retry delay")
			if f.UsesFunctions() {
				t.Fatal("UsesFunctions while the library is not loaded")
			}
			if n := commandCalls(t, b, "function|load"); n != 1 {
				t.Fatalf("FUNCTION LOADs under OOM = %d, want 1 (none within the retry delay)", n)
			}
			if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			run("memory back, still within the delay")
			now = now.Add(retryDelay)
			resetStats(t, b)
			run("a call after the delay")
			run("the next call")
			if !f.UsesFunctions() || f.loaded.Load() == nil {
				t.Fatal("functions off for good after a failed reload under OOM")
			}
			// the ping and the two calls
			if fc, es := commandCalls(t, b, "fcall"), commandCalls(t, b, "evalsha"); fc != 3 || es != 0 {
				t.Fatalf("after the delay: %d FCALL, %d EVALSHA; want 3, 0", fc, es)
			}
			if got := logs.String(); strings.Count(got, "function library loaded again") != 1 {
				t.Fatalf("log lines of the reload: want one \"function library loaded again\"\n%s", got)
			}
		})
	}
}

// TestRevokedFunctionLoadLogsTheMode: an ACL that loses FUNCTION at
// runtime (NOPERM on the reload) moves the client to EVALSHA/EVAL, logged
// as the mode line, and every call still answers.
func TestRevokedFunctionLoadLogsTheMode(t *testing.T) {
	for _, b := range functionBackends(t, true) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			const user = "cp_test_revoked"
			c := aclClient(t, b.Client, user, "+@all")
			var logs logBuffer
			f := Attach(c, slog.New(slog.NewTextHandler(&logs, nil)))
			s, err := New[readArgs, readReply](f, "read_acl", `return {'v', redis.call('GET', K.key) or 'none'}`)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range []func(){
				func() {},
				func() {
					if err := b.Client.Do(ctx, "ACL", "SETUSER", user, "-function").Err(); err != nil {
						t.Fatal(err)
					}
					flushFunctions(t, b)
				},
				func() {},
			} {
				step()
				if r, err := s.Run(ctx, c, &readArgs{Key: "{t}k"}); err != nil || r.V != "none" {
					t.Fatalf("call %d: %+v, %v", i, r, err)
				}
			}
			if f.UsesFunctions() || f.mode.Load() != modeEval {
				t.Fatalf("mode after NOPERM = %d, want EVAL", f.mode.Load())
			}
			if got := logs.String(); !strings.Contains(got, "redis scripts: EVALSHA/EVAL") || !strings.Contains(got, "NOPERM") {
				t.Fatalf("no mode line naming NOPERM:\n%s", got)
			}
		})
	}
}

// TestNotLoadedCallsTakeNoLock: while the library is not loaded (a failed
// reload's retry delay) a call goes by EVALSHA without the Functions'
// mutex, and when a load is due but another goroutine's is in flight (the
// mutex held) it does not wait for it either. Without that, the calls wait
// on the mutex the test holds, and the test fails as soon as their
// goroutine shows that wait (waitUnblocked).
func TestNotLoadedCallsTakeNoLock(t *testing.T) {
	for _, b := range functionBackends(t, false) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			f := Attach(b.Client, nil)
			now := time.Unix(1_700_000_000, 0)
			f.now = func() time.Time { return now }
			s, err := New[readArgs, readReply](f, "read_nolock", `return {'v', redis.call('GET', K.key) or 'none'}`)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Run(ctx, b.Client, &readArgs{Key: "{t}k"}); err != nil || !f.UsesFunctions() {
				t.Fatalf("first call: %v, functions %v", err, f.UsesFunctions())
			}
			// the state a failed reload leaves: not loaded, a retry a second on
			f.loaded.Store(nil)
			f.retryAt.Store(now.Add(retryDelay).UnixNano())
			f.mu.Lock() // a load in flight elsewhere
			defer f.mu.Unlock()
			resetStats(t, b)
			done := make(chan error, 1)
			go func() {
				for _, when := range []string{"within the delay", "due, a load in flight"} {
					if r, err := s.Run(ctx, b.Client, &readArgs{Key: "{t}k"}); err != nil || r.V != "none" {
						done <- fmt.Errorf("%s: %+v, %w", when, r, err)
						return
					}
					now = now.Add(retryDelay)
				}
				done <- nil
			}()
			if err := waitUnblocked(t, done); err != nil {
				t.Fatal(err)
			}
			if fc := commandCalls(t, b, "fcall"); fc != 0 || f.loaded.Load() != nil {
				t.Fatalf("%d FCALL, loaded %v; want 0, not loaded (no load while one is in flight)", fc, f.loaded.Load() != nil)
			}
		})
	}
}

// waitUnblocked is done's value, or fails t at once when a goroutine waits
// to lock a mutex in a Functions method (its stack, checked every
// millisecond until done answers, says so).
func waitUnblocked(t *testing.T, done <-chan error) error {
	t.Helper()
	buf := make([]byte, 1<<20)
	for tick := time.Tick(time.Millisecond); ; <-tick {
		select {
		case err := <-done:
			return err
		default:
		}
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, "script.(*Functions)") {
				t.Fatalf("a call waits for the Functions' mutex (a load in flight):\n%s", g)
			}
		}
	}
}

// TestOneLoadPerFlush: after one FUNCTION FLUSH, the calls that meet
// "Function not found" — 32 goroutines at once, or three calls of one
// pipeline read in turn — load the library once per master, not once per
// call, and each call runs once.
func TestOneLoadPerFlush(t *testing.T) {
	for _, b := range functionBackends(t, false) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			f := Attach(b.Client, nil)
			s, err := New[incArgs, incReply](f, "inc_once", `return {'n', redis.call('INCRBY', K.key, A.by)}`)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := s.Run(ctx, b.Client, &incArgs{Key: "{t}n", By: 1}); err != nil || r.N != 1 {
				t.Fatalf("first run = %+v, %v", r, err)
			}
			want := masters(t, b)

			flushFunctions(t, b)
			resetStats(t, b)
			const n = 32
			start := make(chan struct{})
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, err := s.Run(ctx, b.Client, &incArgs{Key: "{t}n", By: 1})
					errs <- err
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := commandCalls(t, b, "function|load"); got != want {
				t.Fatalf("FUNCTION LOADs for %d concurrent callers after one flush = %d, want %d (one per master)", n, got, want)
			}

			flushFunctions(t, b)
			resetStats(t, b)
			calls := make([]*Call[incArgs, incReply], 3)
			_, _ = b.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := range calls {
					calls[i] = s.Queue(ctx, p, &incArgs{Key: "{t}n", By: 1})
				}
				return nil
			})
			for i, c := range calls {
				r, err := c.Result(ctx, b.Client)
				if err != nil || r.N != int64(1+n+i+1) {
					t.Fatalf("pipelined call %d = %+v, %v; want n=%d", i, r, err, 1+n+i+1)
				}
			}
			if got := commandCalls(t, b, "function|load"); got != want {
				t.Fatalf("FUNCTION LOADs for one pipeline's 3 calls after one flush = %d, want %d", got, want)
			}
			if !f.UsesFunctions() {
				t.Fatal("not on functions after the reloads")
			}
		})
	}
}

// TestAttachIgnoresTheEnvironment: CALLOUT_TEST_SCRIPTS=eval, which once
// kept a client on EVAL, changes nothing: the binary's mode is decided by
// Redis alone (a test build picks EVAL with the tag scripts_eval or
// AttachEval).
func TestAttachIgnoresTheEnvironment(t *testing.T) {
	t.Setenv("CALLOUT_TEST_SCRIPTS", "eval")
	for _, b := range functionBackends(t, false) {
		t.Run(b.Name, func(t *testing.T) {
			f := Attach(b.Client, nil)
			s, err := New[readArgs, readReply](f, "read_env", `return {'v', redis.call('GET', K.key) or 'none'}`)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Run(context.Background(), b.Client, &readArgs{Key: "{t}k"}); err != nil {
				t.Fatal(err)
			}
			if !f.UsesFunctions() {
				t.Fatal("CALLOUT_TEST_SCRIPTS=eval kept the client on EVAL")
			}
		})
	}
}
