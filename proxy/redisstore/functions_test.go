package redisstore

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// evalClient is a second client on e's backend and its script layer on
// the EVALSHA/EVAL path (script.AttachEval), for a store's Options.Scripts.
func evalClient(t *testing.T, e *env) (redis.UniversalClient, *script.Functions) {
	t.Helper()
	var c redis.UniversalClient
	switch x := e.b.Client.(type) {
	case *redis.ClusterClient:
		c = redis.NewClusterClient(x.Options())
	case *redis.Client:
		c = redis.NewClient(x.Options())
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, script.AttachEval(c, nil)
}

// flushAll empties e's backend (every master of a cluster).
func flushAll(t *testing.T, e *env) {
	t.Helper()
	ctx := ctxT(t)
	var err error
	if cc, ok := e.b.Client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushAll(ctx).Err() })
	} else {
		err = e.b.Client.FlushAll(ctx).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestFunctionsAndEvalAgree runs one keyed write's scripts (create.lua,
// complete.lua with the claim at its end, claim.lua) as Redis Functions
// and by EVALSHA on the same real Redis, from the same random source and
// pinned clock, and compares what the store answers and keeps: the two
// paths are the same scripts.
func TestFunctionsAndEvalAgree(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if !e.b.Real() || scriptsEval {
			t.Skip("miniredis has no FUNCTION, and the tag scripts_eval keeps EVAL: the EVAL path only")
		}
		var s *Store
		run := func(c redis.UniversalClient, fns *script.Functions) []any {
			flushAll(t, e)
			s = New(c, Options{PinScriptTime: true, Now: e.clk.Now, Rand: storetest.Rand(7), ResponseBodyCap: 16,
				IdempotencyRetention: day, DeadLetterRetention: 30 * day, Scripts: fns})
			var out []any
			first := mustBegin(t, s, req("agree-api", "k1", `{"a":1}`))
			out = append(out, mustComplete(t, s, first, success()), mustGet(t, s, first.ID))
			second := mustBegin(t, s, req("agree-api", "k2", `{"a":2}`))
			out = append(out, mustComplete(t, s, second, failure(e.clk.Now())))
			out = append(out, mustClaim(t, s, "agree-api", ClaimOptions{Batch: 10, Lease: testLease}), mustGet(t, s, second.ID))
			return out
		}
		viaFunctions := run(e.b.Client, nil)
		if !s.Scripts().UsesFunctions() {
			t.Fatal("the backend's client does not use Redis Functions")
		}
		viaEval := run(evalClient(t, e))
		if s.Scripts().UsesFunctions() {
			t.Fatal("the AttachEval client uses Redis Functions")
		}
		if len(viaFunctions) != len(viaEval) {
			t.Fatalf("%d results by FCALL, %d by EVAL", len(viaFunctions), len(viaEval))
		}
		for i := range viaEval {
			if !reflect.DeepEqual(viaFunctions[i], viaEval[i]) {
				t.Errorf("result %d:\n FCALL %+v\n EVAL  %+v", i, viaFunctions[i], viaEval[i])
			}
		}
	})
}

// TestGateDirtyIsPerCall: lib.lua's gate_dirty, set when a script changes
// what the gate cache shows, never carries into the next call (in a
// function library it would: its locals outlive an FCALL; the reset is
// lib.lua's --@per-call line).
func TestGateDirtyIsPerCall(t *testing.T) {
	_, lib, err := loadScripts(nil)
	if err != nil {
		t.Fatal(err)
	}
	type args struct {
		Key string `lua:"key,key"`
	}
	type reply struct {
		Was int64 `lua:"was"`
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		s, err := script.New[args, reply](script.Attach(e.b.Client, nil), "gate_dirty_probe",
			"local was = gate_dirty and 1 or 0\ngate_dirty = true\nredis.call('INCR', K.key)\nreturn {'was', was}", script.Clock, lib)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			r, err := s.Run(ctxT(t), e.b.Client, &args{Key: "{t}n"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Was != 0 {
				t.Fatalf("call %d saw gate_dirty set by the one before", i+1)
			}
		}
	})
}

// TestScriptTimeFunctionsVsEval logs what create.lua and complete.lua cost
// Redis per call as Redis Functions (FCALL) and by EVALSHA, in one run on
// the real single node, call for call (a keyed write alternating between a
// store whose client uses functions and one that keeps EVAL): the
// script's own time from SLOWLOG (median and least) and INFO commandstats'
// usec_per_call of fcall and evalsha. A measurement, not an assertion
// (docs/performance.md "Redis Functions").
func TestScriptTimeFunctionsVsEval(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" || scriptsEval {
			t.Skip("SLOWLOG and INFO commandstats are read on the real single node, with functions")
		}
		ctx := ctxT(t)
		c := e.b.Client
		sf := e.store()
		ec, efns := evalClient(t, e)
		se := New(ec, Options{PinScriptTime: true, Now: e.clk.Now, Rand: storetest.Rand(99), ResponseBodyCap: 16,
			IdempotencyRetention: day, DeadLetterRetention: 30 * day, Scripts: efns})
		// Which script each SLOWLOG entry ran: by function name or SHA-1.
		names := map[string]string{}
		for _, sc := range []interface {
			Name() string
			SHA() string
			Function() string
		}{sf.lua.create, sf.lua.complete} {
			names[sc.SHA()], names[sc.Function()] = sc.Name(), sc.Name()
		}
		mustComplete(t, sf, mustBegin(t, sf, req("cost-api", "warm", "{}")), success())
		mustComplete(t, se, mustBegin(t, se, req("cost-api", "warm-e", "{}")), success())
		if !sf.Scripts().UsesFunctions() {
			t.Fatal("the single node's client does not use Redis Functions")
		}
		const n = 1000
		slowlogAll(t, c, 40*n)
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			s := sf
			if i%2 == 1 {
				s = se
			}
			cl := mustBegin(t, s, req("cost-api", fmt.Sprintf("w-%d", i), `{"amount":1000,"currency":"eur"}`))
			mustComplete(t, s, cl, success())
		}
		us := slowScripts(t, c, func(cmd, target string) string {
			if name, ok := names[target]; ok {
				return name + " " + cmd
			}
			return ""
		})
		stats := c.Info(ctx, "commandstats").Val()
		for _, k := range []string{"create fcall", "create evalsha", "complete fcall", "complete evalsha"} {
			if d := us[k]; len(d) > 0 {
				t.Logf("%s: %s", k, slowSummary(d))
			} else {
				t.Logf("%s: no SLOWLOG entries", k)
			}
		}
		for _, line := range strings.Split(stats, "\n") {
			if strings.HasPrefix(line, "cmdstat_fcall:") || strings.HasPrefix(line, "cmdstat_evalsha:") {
				t.Logf("%s", strings.TrimSpace(line))
			}
		}
	})
}

// TestGetWaitingAfterFunctionFlush: GET of a waiting callout right after
// the function library was lost (FUNCTION FLUSH) answers the callout: the
// gate read queued in its pipeline met "Function not found", which the
// pipeline's caller passes over as it does NOSCRIPT (script.Missing), and
// runs again. It used to answer store-unavailable until the library was
// back.
func TestGetWaitingAfterFunctionFlush(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		cl := mustBegin(t, s, req("flush-api", "k1", `{}`))
		mustComplete(t, s, cl, failure(e.clk.Now()))
		if got := mustGet(t, s, cl.ID); got.State != policy.Scheduled {
			t.Fatalf("state before the flush = %s, want scheduled", got.State)
		}
		if e.b.Real() {
			ctx := ctxT(t)
			var err error
			if cc, ok := e.b.Client.(*redis.ClusterClient); ok {
				err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FunctionFlush(ctx).Err() })
			} else {
				err = e.b.Client.FunctionFlush(ctx).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			got, err := s.Get(ctxT(t), cl.ID)
			if err != nil || got.State != policy.Scheduled {
				t.Fatalf("GET %d after FUNCTION FLUSH = %v, %v; want the scheduled callout", i+1, got, err)
			}
		}
	})
}
