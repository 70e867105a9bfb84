package redisstore

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
)

// commandStats reads INFO commandstats: calls by command name.
func commandStats(t *testing.T, e *env) map[string]int64 {
	t.Helper()
	info, err := e.b.Client.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return parseCommandStats(info)
}

// parseCommandStats reads the calls by command of INFO commandstats.
func parseCommandStats(info string) map[string]int64 { return parseCommandStat(info, "calls") }

// parseCommandStat reads one figure of INFO commandstats by command:
// "calls", or "usec" (the µs Redis spent in it; a script's own figure
// includes the commands it ran, which also count under their names).
func parseCommandStat(info, stat string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, stat+"="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return out
}

// budget runs op n times on the real single node and returns the commands
// Redis ran per op (scripts' commands and the EVALSHAs themselves), and
// the breakdown.
func budget(t *testing.T, e *env, n int, op func(i int)) (float64, string) {
	t.Helper()
	if err := e.b.Client.ConfigResetStat(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		op(i)
	}
	st := commandStats(t, e)
	delete(st, "info")
	delete(st, "config|resetstat")
	var total int64
	var parts []string
	for name, c := range st {
		total += c
		parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(c)/float64(n)))
	}
	sort.Strings(parts)
	return float64(total) / float64(n), strings.Join(parts, ", ")
}

// The hot path's Redis budget: a lone synchronous keyed write
// that succeeds runs at most 14 commands, its two scripts' EVALSHA included
// (fewer each under concurrency, logged), and a
// dispatched attempt (claim share and completion) stays small, measured by
// INFO commandstats on the real single node.
func TestCommandBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" {
			t.Skip("INFO commandstats is read on the real single node")
		}
		s := e.store()
		// warm: endpoint hash, issuer map
		mustComplete(t, s, mustBegin(t, s, req("budget-api", "warm", "{}")), success())
		mustClaim(t, s, "budget-api", claimOpts)
		const n = 200
		var cls []*policy.Claimed
		begin, beginBy := budget(t, e, n, func(i int) {
			cls = append(cls, mustBegin(t, s, req("budget-api", fmt.Sprintf("k-%d", i), "{}")))
		})
		complete, completeBy := budget(t, e, n, func(i int) { mustComplete(t, s, cls[i], success()) })
		t.Logf("keyed write: begin %.2f commands (%s); complete %.2f (%s); in all %.2f", begin, beginBy,
			complete, completeBy, begin+complete)
		// A lone keyed write: 13 with the two EVALSHA themselves.
		// create.lua takes the reservation with one SET … NX GET; the
		// counters are charged at the create and released at the end, as a
		// synchronous attempt in flight counts toward the caps and the org
		// shares (TestSynchronousWritesInFlightCountTowardShares). Under
		// concurrency the completion writer's one call per queue shares its
		// EVALSHA and the counters' HMGET and HSET (concurrentKeyedWrites).
		if begin+complete > 13 {
			t.Errorf("begin runs %.2f and complete %.2f commands with their EVALSHA, want at most 13 in all", begin, complete)
		}
		concurrentKeyedWrites(t, e, s)
		for i := range n {
			mustEnqueueReq(t, s, req("budget-api", fmt.Sprintf("a-%d", i), "{}"))
		}
		var claimed []*policy.Claimed
		claim, claimBy := budget(t, e, n/20, func(int) {
			claimed = append(claimed, mustClaim(t, s, "budget-api", ClaimOptions{Batch: 20, Lease: testLease}).Claimed...)
		})
		if len(claimed) != n {
			t.Fatalf("claimed %d, want %d", len(claimed), n)
		}
		done, doneBy := budget(t, e, n, func(i int) {
			comp := failure(e.clk.Now().Add(time.Hour))
			comp.CountsTowardBreaker = false
			mustComplete(t, s, claimed[i], comp)
		})
		t.Logf("dispatched attempt: claim of 20 %.2f commands (%s), %.2f per attempt; retry completion %.2f (%s)",
			claim, claimBy, claim/20, done, doneBy)
		completerScriptTime(t, e, s)
	})
}

// completerScriptTime logs what Redis spends on the completions of
// dispatched attempts that 16 goroutines finish at once (the async drain's
// completions), handed to a Completer ("completer") and, for
// comparison, each sent alone (Store.Complete, "direct"): the script time
// per completion from INFO commandstats usec of EVALSHA (and EVAL; FCALL
// on a client that uses functions) — the least and the median of 5 rounds of 640, as other work on a shared
// machine only adds to it — the commands run and script calls per
// completion. A measurement, not an assertion: the figures depend on the
// machine (docs/performance.md).
func completerScriptTime(t *testing.T, e *env, s *Store) {
	t.Helper()
	const n, callers, rounds = 640, 16, 5
	for _, mix := range []string{"successes", "retries"} {
		for _, via := range []string{"completer", "direct"} {
			var us, cpus []float64
			var cmds, scripts float64
			for r := range rounds {
				u, cpu, c, sc := completionRound(t, e, s, fmt.Sprintf("budget-%s-%s-%d", via, mix, r), n, callers,
					via == "direct", mix == "retries")
				us, cpus, cmds, scripts = append(us, u), append(cpus, cpu), cmds+c/rounds, scripts+sc/rounds
			}
			sort.Float64s(us)
			sort.Float64s(cpus)
			t.Logf("%s, %d callers, %s of dispatched attempts, per completion: Redis script time %.1f µs (median %.1f), "+
				"Redis CPU %.1f µs (median %.1f), least of %d rounds of %d; %.2f commands, %.3f script calls",
				via, callers, mix, us[0], us[rounds/2], cpus[0], cpus[rounds/2], rounds, n, cmds, scripts)
		}
	}
}

// completionRound claims n callouts of endpoint ep and completes them from
// callers goroutines (direct: Store.Complete, else through a Completer),
// success or retry; it returns Redis's script µs, its process's CPU µs
// (the INFO calls included), commands and script calls per completion.
func completionRound(t *testing.T, e *env, s *Store, ep string, n, callers int, direct, retry bool) (float64, float64, float64, float64) {
	t.Helper()
	mustEnqueue(t, s, ep, n)
	var claimed []*policy.Claimed
	for len(claimed) < n {
		r := mustClaim(t, s, ep, ClaimOptions{Batch: 20, Lease: testLease})
		if len(r.Claimed) == 0 {
			t.Fatalf("claimed %d of %d", len(claimed), n)
		}
		claimed = append(claimed, r.Claimed...)
	}
	c := NewCompleter(s, batch.Options{})
	defer c.Close()
	complete := c.Complete
	if direct {
		complete = s.Complete
	}
	if err := e.b.Client.ConfigResetStat(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	cpu0 := redisCPU(t, e)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := g; i < n; i += callers {
				comp := success()
				if retry {
					comp = failure(e.clk.Now().Add(time.Hour))
					comp.CountsTowardBreaker = false
				}
				if _, err := complete(ctxT(t), claimed[i], comp); err != nil {
					t.Errorf("complete %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	cpu := redisCPU(t, e) - cpu0
	info, err := e.b.Client.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls, usec := parseCommandStat(info, "calls"), parseCommandStat(info, "usec")
	var cmds int64
	for name, v := range calls {
		if name != "info" && name != "config|resetstat" && name != "hello" {
			cmds += v
		}
	}
	f := float64(n)
	return float64(usec["evalsha"]+usec["eval"]+usec["fcall"]) / f, cpu.Seconds() * 1e6 / f, float64(cmds) / f,
		float64(calls["evalsha"]+calls["eval"]+calls["fcall"]) / f
}

// redisCPU is the CPU time the real single node's process has used
// (INFO cpu: used_cpu_sys + used_cpu_user).
func redisCPU(t *testing.T, e *env) time.Duration {
	t.Helper()
	info, err := e.b.Client.Info(ctxT(t), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sec float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			x, _ := strconv.ParseFloat(v, 64)
			sec += x
		}
	}
	return time.Duration(sec * float64(time.Second))
}

func mustBegin(t *testing.T, s *Store, nc policy.NewCallout) *policy.Claimed {
	t.Helper()
	r, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
	if err != nil || r.Claimed == nil {
		t.Fatalf("begin: %+v, %v", r, err)
	}
	return r.Claimed
}

// concurrentKeyedWrites logs the commands Redis runs per synchronous keyed
// write (Begin, then its completion through a Completer) when 16 callers
// write at once, as the ingress does under load: the completions of a
// pipeline share one complete.lua call. A measurement: how many share a
// call depends on timing.
func concurrentKeyedWrites(t *testing.T, e *env, s *Store) {
	t.Helper()
	const n, callers = 640, 16
	c := NewCompleter(s, batch.Options{})
	defer c.Close()
	if err := e.b.Client.ConfigResetStat(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := g; i < n; i += callers {
				r, err := s.Begin(ctxT(t), req("budget-conc", fmt.Sprintf("c-%d", i), "{}"), policy.BeginOptions{Lease: testLease})
				if err != nil || r.Claimed == nil {
					t.Errorf("begin %d: %+v %v", i, r, err)
					return
				}
				if _, err := c.Complete(ctxT(t), r.Claimed, success()); err != nil {
					t.Errorf("complete %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	info, err := e.b.Client.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var cmds int64
	for name, v := range parseCommandStat(info, "calls") {
		if name != "info" && name != "config|resetstat" && name != "hello" {
			cmds += v
		}
	}
	t.Logf("keyed writes, %d callers through a Completer: %.2f commands per write, EVALSHA included", callers,
		float64(cmds)/n)
}
