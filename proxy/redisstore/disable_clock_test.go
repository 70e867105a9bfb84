package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// TestAutoDisableFollowsRedisClock: auto-disable is decided on Redis's
// clock (disable.lua re-checks the outage start against TIME): a replica
// 90 s ahead, whose own clock says a 30 s old outage has lasted the 60 s
// of disable_after, does not disable; one 90 s behind disables an outage
// 61 s old by Redis's clock.
func TestAutoDisableFollowsRedisClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ahead, behind := skewedStore(e, 90*time.Second), skewedStore(e, -90*time.Second)
		p := policy.Defaults()
		p.DisableAfter = time.Minute
		outage := func(ago time.Duration) time.Time {
			at := e.b.Now(t).Add(-ago)
			if err := e.b.Client.HSet(ctxT(t), keyspace.Endpoint("clock-dis"), eOutage, at.UnixMilli()).Err(); err != nil {
				t.Fatal(err)
			}
			return at
		}
		began := outage(30 * time.Second)
		if !policy.AutoDisable(p, time.Time{}, began, ahead.now()) {
			t.Fatal("the replica ahead's own clock should see the outage as due (the case under test)")
		}
		res, err := ahead.AutoDisable(ctxT(t), "clock-dis", p.DisableAfter, "auto")
		if err != nil || res.Newly {
			t.Fatalf("auto-disable by the replica ahead of a 30 s outage = %+v, %v; want not disabled", res, err)
		}
		if dis, _ := e.b.Client.HGet(ctxT(t), keyspace.Endpoint("clock-dis"), eDisabled).Result(); dis != "" {
			t.Fatalf("endpoint disabled flag = %q after a refused auto-disable, want none", dis)
		}
		outage(61 * time.Second)
		if res, err = behind.AutoDisable(ctxT(t), "clock-dis", p.DisableAfter, "auto"); err != nil || !res.Newly {
			t.Fatalf("auto-disable by the replica behind of a 61 s outage = %+v, %v; want disabled", res, err)
		}
	})
}
