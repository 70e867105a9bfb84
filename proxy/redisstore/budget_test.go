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

// The hot path's Redis budget (issue 17): a synchronous keyed write that
// succeeds runs at most 12 commands, its two scripts' EVALSHA included, and a
// dispatched attempt (claim share and completion) stays small, measured by
// INFO commandstats on the real single node.
func TestCommandBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" {
			t.Skip("INFO commandstats is read on the real single node")
		}
		s := e.store()
		// warm: endpoint hash, issuer map, legacy sets noted empty
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
		// 12 in all with the two EVALSHA themselves, during the legacy window
		// (one HMGET of a legacy reservation; 11 after it): create.lua takes
		// the reservation with one SET … NX GET and charges nothing for a
		// synchronous attempt, so a success writes no counters either.
		if begin+complete > 12 {
			t.Errorf("begin runs %.2f and complete %.2f commands with their EVALSHA, want at most 12 in all", begin, complete)
		}
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
// dispatched attempts that 16 goroutines hand a Completer at once (the
// async drain's completions, issue 17 §4): the script time per completion
// from INFO commandstats usec of EVALSHA (and EVAL), the commands run and
// script calls per completion. A measurement, not an assertion: the
// figures depend on the machine (docs/performance.md).
func completerScriptTime(t *testing.T, e *env, s *Store) {
	t.Helper()
	const n, callers = 640, 16
	for _, mix := range []string{"successes", "retries"} {
		ep := "budget-drain-" + mix
		mustEnqueue(t, s, ep, n)
		var claimed []*policy.Claimed
		for len(claimed) < n {
			r := mustClaim(t, s, ep, ClaimOptions{Batch: 20, Lease: testLease})
			if len(r.Claimed) == 0 {
				t.Fatalf("claimed %d of %d", len(claimed), n)
			}
			claimed = append(claimed, r.Claimed...)
		}
		c := NewCompleter(s, CompleterOptions{})
		if err := e.b.Client.ConfigResetStat(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				for i := g; i < n; i += callers {
					comp := success()
					if mix == "retries" {
						comp = failure(e.clk.Now().Add(time.Hour))
						comp.CountsTowardBreaker = false
					}
					if _, err := c.Complete(ctxT(t), claimed[i], comp); err != nil {
						t.Errorf("complete %d: %v", i, err)
					}
				}
			})
		}
		wg.Wait()
		c.Close()
		info, err := e.b.Client.Info(ctxT(t), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		calls, usec := parseCommandStat(info, "calls"), parseCommandStat(info, "usec")
		var cmds int64
		for name, v := range calls {
			if name != "info" && name != "config|resetstat" {
				cmds += v
			}
		}
		scripts := calls["evalsha"] + calls["eval"]
		t.Logf("completer, %d callers, %d %s of dispatched attempts: Redis script time %.1f µs per completion; "+
			"%.2f commands and %.3f script calls per completion", callers, n, mix,
			float64(usec["evalsha"]+usec["eval"])/n, float64(cmds)/n, float64(scripts)/n)
	}
}

func mustBegin(t *testing.T, s *Store, nc policy.NewCallout) *policy.Claimed {
	t.Helper()
	r, err := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
	if err != nil || r.Claimed == nil {
		t.Fatalf("begin: %+v, %v", r, err)
	}
	return r.Claimed
}
