package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// TestCreateScriptTime logs what one create.lua run costs Redis on the real
// single node, for a lone caller: the script's own time per call from
// SLOWLOG (slowlog-log-slower-than 0: every EVALSHA or FCALL is logged
// with the commands it ran inside; the median and the least of n) and the commands
// run per create (INFO commandstats, EVALSHA included), for Begin (a
// synchronous keyed write) and Enqueue (a keyed Prefer: respond-async
// write). With CALLOUT_CREATE_BEFORE=FILE (an earlier create.lua, e.g.
// `git show REV:proxy/redisstore/lua/create.lua`), every other create runs
// that script instead, so before and after are measured in the same run,
// call for call. A measurement, not an assertion: the figures depend on
// the machine (docs/performance.md "What one keyed write costs Redis").
func TestCreateScriptTime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" {
			t.Skip("SLOWLOG and INFO commandstats are read on the real single node")
		}
		s := e.store()
		c := e.b.Client
		after := s.lua.create
		before := after
		if path := os.Getenv("CALLOUT_CREATE_BEFORE"); path != "" {
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, lib, err := loadScripts(nil)
			if err != nil {
				t.Fatal(err)
			}
			// the earlier script's own constant, which lib.lua no longer has;
			// registered with the store's client before its first script call,
			// so both run as functions, or both by EVALSHA
			src := "local record_overhead = 256\n" + string(body)
			if before, err = script.New[createArgs, createResult](s.Scripts(), "create", src, script.Clock, lib); err != nil {
				t.Fatal(err)
			}
		}
		variants := map[string]string{sha1hex(after.Source()): "after", after.Function(): "after"}
		if before != after {
			variants[sha1hex(before.Source())] = "before"
			variants[before.Function()] = "before"
		}
		mustComplete(t, s, mustBegin(t, s, req("cost-api", "warm", "{}")), success()) // endpoint hash, issuer map
		const n = 1000
		for _, op := range []string{"begin", "enqueue"} {
			slowlogAll(t, c, 20*n)
			cmds, by := budget(t, e, n, func(i int) {
				s.lua.create = after
				if i%2 == 1 {
					s.lua.create = before
				}
				nc := req("cost-api", fmt.Sprintf("%s-%d", op, i), `{"amount":1000,"currency":"eur"}`)
				if op == "begin" {
					mustBegin(t, s, nc)
				} else {
					mustEnqueueReq(t, s, nc)
				}
			})
			s.lua.create = after
			us := slowScripts(t, c, func(_, target string) string { return variants[target] })
			for _, v := range []string{"before", "after"} {
				if d := us[v]; len(d) > 0 {
					t.Logf("%s, lone caller, create.lua %s: %s", op, v, slowSummary(d))
				}
			}
			t.Logf("%s: %.2f commands per create, EVALSHA included (%s)", op, cmds, by)
		}
	})
}

// slowlogAll makes c's SLOWLOG log every command, up to max entries, from
// an empty log; c's slowlog settings are restored when t ends.
func slowlogAll(t *testing.T, c redis.UniversalClient, max int) {
	ctx := ctxT(t)
	old := c.ConfigGet(ctx, "slowlog-*").Val()
	t.Cleanup(func() {
		for k, v := range old {
			_ = c.ConfigSet(ctx, k, v).Err()
		}
	})
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", fmt.Sprint(max)}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SlowLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// slowScripts stops the logging slowlogAll started and reads c's SLOWLOG:
// the times (µs) of the EVALSHA and FCALL entries, by key(cmd, target)
// (cmd lower case, target the SHA-1 or function name; "" leaves it out).
func slowScripts(t *testing.T, c redis.UniversalClient, key func(cmd, target string) string) map[string][]int64 {
	ctx := ctxT(t)
	_ = c.ConfigSet(ctx, "slowlog-log-slower-than", "-1").Err()
	logs, err := c.Do(ctx, "SLOWLOG", "GET", -1).Slice()
	if err != nil {
		t.Fatal(err)
	}
	us := map[string][]int64{}
	for _, l := range logs {
		ent, _ := l.([]any)
		if len(ent) < 4 {
			continue
		}
		args, _ := ent[3].([]any)
		if len(args) < 2 {
			continue
		}
		cmd := strings.ToLower(fmt.Sprint(args[0]))
		if k := key(cmd, fmt.Sprint(args[1])); k != "" && (cmd == "fcall" || cmd == "evalsha") {
			us[k] = append(us[k], ent[2].(int64))
		}
	}
	return us
}

// slowSummary sorts d (µs) and tells its median, least and p90.
func slowSummary(d []int64) string {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return fmt.Sprintf("SLOWLOG median %d µs, least %d, p90 %d (%d calls)", d[len(d)/2], d[0], d[len(d)*9/10], len(d))
}

func sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
