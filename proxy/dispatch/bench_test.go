package dispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
)

// BenchmarkDispatch measures how fast one replica drains due callouts
// into a fast upstream (a real httptest server answering 200): b.N
// callouts spread over 4 endpoints are enqueued before the timer starts,
// then Round + Wait run until every one has been claimed, dispatched and
// completed (claim.lua, one HTTP request, complete.lua each). One op is
// one attempt; it reports ns/op and attempts/s. It runs on miniredis, and
// on the real single node and cluster when CALLOUT_TEST_REDIS_URL and
// CALLOUT_TEST_REDIS_CLUSTER are set. Round + Wait does not overlap one
// round's completions with the next round's claims, as Run does, so this
// is a lower bound for Run.
//
// Sub-benchmarks: "refill" completes through a redisstore.Completer (as
// cmd/callout-proxy does), so each attempt's completion also claims its
// endpoint's next callouts in the same complete.lua call; "writer" through
// the Completer without refills (every claim a Round's: the dispatcher
// before 2026-12-03); "rounds" through Store.Complete.
func BenchmarkDispatch(b *testing.B) {
	for _, mode := range []string{"rounds", "writer", "refill"} {
		b.Run(mode, func(b *testing.B) { benchDispatch(b, mode) })
	}
}

// plainCompletions hides a Completer's CompleteAndClaim: completions
// only.
type plainCompletions struct{ c *redisstore.Completer }

func (p plainCompletions) Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error) {
	return p.c.Complete(ctx, cl, c)
}

func benchDispatch(b *testing.B, mode string) {
	forEachBackendB(b, func(b *testing.B, h *harness, names []string) {
		o := dispatch.Options{Concurrency: 64, PerEndpoint: 32, Batch: 32}
		if mode != "rounds" {
			c := redisstore.NewCompleter(h.store, batch.Options{})
			b.Cleanup(c.Close)
			o.Completions = c
			if mode == "writer" {
				o.Completions = plainCompletions{c}
			}
		}
		d := h.dispatcher(h.store, o)
		for i := range b.N {
			h.enqueue(names[i%len(names)], http.MethodPost, "/bench", "", time.Time{})
		}
		b.ResetTimer()
		r0, p0 := redisStats(b, h.b), procCPU()
		start := time.Now()
		for done := 0; done < b.N; {
			if n := h.round(d); n == 0 {
				b.Fatalf("no progress after %d of %d attempts", done, b.N)
			}
			done = int(h.ended.Load())
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "attempts/s")
		n := float64(b.N)
		b.ReportMetric((procCPU()-p0).Seconds()*1e6/n, "proc-µs/attempt")
		if r1 := redisStats(b, h.b); r1 != nil {
			d := r1.minus(r0)
			b.ReportMetric(d.calls/n, "redis-cmds/attempt")
			b.ReportMetric(d.scripts/n, "scripts/attempt")
			b.ReportMetric(d.scriptUsec/n, "script-µs/attempt")
			b.ReportMetric(d.cpuUsec/n, "redis-cpu-µs/attempt")
		}
		for _, name := range names {
			if st := h.state(name); st.Due != 0 || st.Leased != 0 {
				b.Fatalf("%s not drained: %d due, %d leased", name, st.Due, st.Leased)
			}
		}
	})
}

// forEachBackendB runs fn as a sub-benchmark per backend with a harness
// whose 4 endpoints share one fast upstream.
func forEachBackendB(b *testing.B, fn func(b *testing.B, h *harness, names []string)) {
	for _, be := range redistest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			up := proctest.NewUpstream(b, status(http.StatusOK))
			var eps []ep
			var names []string
			for i := range 4 {
				name := fmt.Sprintf("bench-%d", i)
				eps, names = append(eps, ep{name: name, url: up.URL}), append(names, name)
			}
			h := newHarness(b, be, newConfig(b, nil, eps...))
			fn(b, h, names)
			if got := h.ended.Load(); got != int64(b.N) {
				b.Fatalf("%d endings reported, want %d (every callout succeeded)", got, b.N)
			}
		})
	}
}

// redisCounters are a real backend's INFO figures summed over its
// primaries: commands run (INFO commandstats calls, scripts' own commands
// included, INFO and CONFIG left out), script calls (evalsha, eval,
// fcall) and their usec, and the process CPU (INFO cpu, µs).
type redisCounters struct{ calls, scripts, scriptUsec, cpuUsec float64 }

func (a *redisCounters) minus(b *redisCounters) redisCounters {
	return redisCounters{a.calls - b.calls, a.scripts - b.scripts, a.scriptUsec - b.scriptUsec, a.cpuUsec - b.cpuUsec}
}

// redisStats reads be's counters; nil for miniredis.
func redisStats(b *testing.B, be redistest.Backend) *redisCounters {
	if be.Mini != nil {
		return nil
	}
	ctx := context.Background()
	out := &redisCounters{}
	read := func(c *redis.Client) error {
		v, err := c.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return err
		}
		for _, l := range strings.Split(v, "\n") {
			l = strings.TrimSpace(l)
			if name, rest, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(name, "cmdstat_") {
				name = strings.TrimPrefix(name, "cmdstat_")
				var calls, usec float64
				for _, kv := range strings.Split(rest, ",") {
					k, v, _ := strings.Cut(kv, "=")
					f, _ := strconv.ParseFloat(v, 64)
					switch k {
					case "calls":
						calls = f
					case "usec":
						usec = f
					}
				}
				if name == "info" || name == "config" {
					continue
				}
				out.calls += calls
				if name == "evalsha" || name == "eval" || name == "fcall" || name == "evalsha_ro" || name == "fcall_ro" {
					out.scripts += calls
					out.scriptUsec += usec
				}
			} else if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
				f, _ := strconv.ParseFloat(rest, 64)
				out.cpuUsec += f * 1e6
			}
		}
		return nil
	}
	var err error
	switch c := be.Client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return read(n)
		})
	case *redis.Client:
		err = read(c)
	default:
		return nil
	}
	if err != nil {
		b.Fatalf("INFO: %v", err)
	}
	return out
}

// procCPU is this process's CPU time so far (user + system): the
// dispatcher and the test upstream, which share it.
func procCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
