//go:build fault

package fault

import (
	"strings"
	"testing"

	proxyconfig "github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestSentinelUnknownMasterNameRefused: a master_name the Sentinels do
// not monitor ends the start with an error naming it (SENTINEL
// get-master-addr-by-name answers nil), instead of running as if Redis
// were down (go-redis: "all sentinels are unreachable").
func TestSentinelUnknownMasterNameRefused(t *testing.T) {
	port := proctest.FreePort(t)
	runRedisNode(t, "primary", port)
	sentinels := startSentinels(t, port, 0)
	up := proctest.NewUpstream(t, nil)
	cfg := sentinelConfig(sentinels, proxyconfig.DurabilityLocal, nil, endpoint("pay", up.URL))
	cfg = strings.Replace(cfg, "master_name: "+masterName, "master_name: callout-typo", 1)
	out := refusedStart(t, "typo", cfg)
	if !strings.Contains(out, `"callout-typo"`) || !strings.Contains(out, "redis.sentinel.master_name") ||
		!strings.Contains(out, "3 of 3") {
		t.Errorf("the refusal does not name the master name and the Sentinels' answer:\n%s", out)
	}
}
