package redisstore

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
)

// The Redis cost of a dispatched attempt's claim and completion, one
// caller, batches of 16 on the real single node (INFO commandstats; the
// least of 5 rounds of 320 attempts, logged, not asserted — script time
// is a measurement): "separate", a ClaimBatch (candidates pipeline and
// claim.lua) and one complete.lua call of the 16 completions, as the
// dispatcher's rounds do; "fused", one complete.lua call that completes 16
// and claims their 16 successors (CompleteAndClaim). The fused commands
// per attempt are asserted to stay below the separate ones.
func TestClaimAndCompleteBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" {
			t.Skip("the single node only")
		}
		const batchN, rounds = 16, 20
		figures := map[string][4]float64{} // mode -> least script µs, commands, script calls, µs in commands per attempt
		for _, mode := range []string{"separate", "fused"} {
			best := [4]float64{-1, 0, 0, 0}
			for run := range 5 {
				s := e.store()
				ep := "budget-" + mode
				mustEnqueue(t, s, ep, batchN*(rounds+1))
				cls := mustClaim(t, s, ep, ClaimOptions{Batch: batchN, Lease: testLease}).Claimed
				if err := e.b.Client.ConfigResetStat(ctxT(t)).Err(); err != nil {
					t.Fatal(err)
				}
				for range rounds {
					ps := make([]*completion, len(cls))
					for i, cl := range cls {
						p, err := s.prepareComplete(ctxT(t), cl, success())
						if err != nil {
							t.Fatal(err)
						}
						if mode == "fused" {
							p.next = &nextClaim{want: 1, lease: testLease}
						}
						ps[i] = p
					}
					if err := s.writeCompletions(ctxT(t), ps); err != nil {
						t.Fatal(err)
					}
					var next []*policy.Claimed
					for _, p := range ps {
						if _, err := s.finishComplete(ctxT(t), p); err != nil {
							t.Fatal(err)
						}
						if p.next != nil {
							next = append(next, p.next.res.Claimed...)
						}
					}
					if mode == "separate" {
						next = mustClaim(t, s, ep, ClaimOptions{Batch: batchN, Lease: testLease}).Claimed
					}
					if len(next) != batchN {
						t.Fatalf("%s run %d: claimed %d, want %d", mode, run, len(next), batchN)
					}
					cls = next
				}
				info, err := e.b.Client.Info(ctxT(t), "commandstats").Result()
				if err != nil {
					t.Fatal(err)
				}
				calls, usec := parseCommandStat(info, "calls"), parseCommandStat(info, "usec")
				var cmds, cmdUsec int64
				for name, c := range calls {
					if name != "info" && name != "config|resetstat" {
						cmds += c
						if name != "evalsha" && name != "eval" && name != "fcall" {
							cmdUsec += usec[name]
						}
					}
				}
				n := float64(batchN * rounds)
				if f := float64(usec["evalsha"]+usec["fcall"]) / n; best[0] < 0 || f < best[0] {
					best = [4]float64{f, float64(cmds) / n, float64(calls["evalsha"]+calls["fcall"]) / n, float64(cmdUsec) / n}
				}
			}
			figures[mode] = best
			t.Logf("%s: %.1f µs of script time, %.1f µs in commands (scripts' and the candidates pipeline's), "+
				"%.2f commands, %.3f script calls per attempt", mode, best[0], best[3], best[1], best[2])
		}
		if figures["fused"][1] >= figures["separate"][1] {
			t.Errorf("fused: %.2f commands per attempt, separate %.2f; want fewer", figures["fused"][1], figures["separate"][1])
		}
	})
}
