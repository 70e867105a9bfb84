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
		ctx := ctxT(t)
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
		old := c.ConfigGet(ctx, "slowlog-*").Val()
		t.Cleanup(func() {
			for k, v := range old {
				_ = c.ConfigSet(ctx, k, v).Err()
			}
		})
		const n = 1000
		for _, op := range []string{"begin", "enqueue"} {
			for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", fmt.Sprint(20 * n)}} {
				if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.SlowLogReset(ctx).Err(); err != nil {
				t.Fatal(err)
			}
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
				if len(args) > 1 && (strings.EqualFold(fmt.Sprint(args[0]), "evalsha") || strings.EqualFold(fmt.Sprint(args[0]), "fcall")) {
					if v, ok := variants[fmt.Sprint(args[1])]; ok {
						us[v] = append(us[v], ent[2].(int64))
					}
				}
			}
			for _, v := range []string{"before", "after"} {
				d := us[v]
				if len(d) == 0 {
					continue
				}
				sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
				t.Logf("%s, lone caller, create.lua %s: SLOWLOG median %d µs, least %d, p90 %d (%d calls)",
					op, v, d[len(d)/2], d[0], d[len(d)*9/10], len(d))
			}
			t.Logf("%s: %.2f commands per create, EVALSHA included (%s)", op, cmds, by)
		}
	})
}

func sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
