//go:build fault

package fault

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// skewBinary is the callout-proxy binary built with the faultclock tag
// (CALLOUT_FAULT_CLOCK_OFFSET offsets its wall clock): the one .ci/fault.sh
// builds (CALLOUT_FAULT_CLOCK_BINARY), or one built here once.
var skewBinary = sync.OnceValues(func() (string, error) {
	if b := os.Getenv("CALLOUT_FAULT_CLOCK_BINARY"); b != "" {
		return b, nil
	}
	dir, err := os.MkdirTemp("", "faultclock")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "callout-proxy")
	cmd := exec.Command(proctest.GoTool(), "build", "-tags", "faultclock", "-o", bin, "./cmd/callout-proxy")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -tags faultclock: %v\n%s", err, out)
	}
	return bin, nil
})

// TestClockSkew: two replicas on one Redis whose wall clocks are 180 s
// apart (+90 s and −90 s, the faultclock build), once as deployed (each
// reads Redis's clock through its measured offset) and once without that
// correction (a replica before its first measurement: only the scripts'
// TIME keeps shared state right). Leases are 1 s + policy.LeaseGrace, far
// shorter than the skew, so a replica that judged leases by its own clock
// would take the other's fresh ones. Asserted (contract §1): no
// Idempotency-Key ever has two requests at the upstream at once, no
// callout is sent again after it succeeded, attempt durations are true,
// and an open breaker lets exactly one probe out at a time, never before
// its probe interval.
func TestClockSkew(t *testing.T) {
	bin, err := skewBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		uncorrected string
	}{{"corrected", ""}, {"uncorrected", "1"}} {
		t.Run(tc.name, func(t *testing.T) { testClockSkew(t, bin, tc.uncorrected) })
	}
}

func testClockSkew(t *testing.T, bin, uncorrected string) {
	rs := proctest.StartRedis(t, true)

	// skew-api: every key's first attempt is a 503 (a retry on Redis's
	// due time), its second a 200; each takes 300 ms at the upstream.
	var mu sync.Mutex
	seen := map[string]int{}
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		n := seen[r.Header.Get("Idempotency-Key")]
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	// probe-api: always 503 after 400 ms; three failures open its breaker
	// for 2 s, and every failed probe reopens it for another 2 s.
	probes := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	const probeInterval = 2 * time.Second
	cfg := config(rs.URL, []string{"connect_timeout: 500ms", "attempt_timeout: 1s", "header_timeout: 1s",
		"base_delay: 200ms", "max_delay: 500ms"},
		endpoint("skew-api", up.URL),
		endpoint("probe-api", probes.URL, "breaker_failures: 3", fmt.Sprintf("breaker_probe_interval: %s", probeInterval)))
	var reps []*proctest.Proxy
	for i, off := range []string{"90s", "-90s"} {
		env := map[string]string{"TEST_JWT_SECRET": testSecret, "CALLOUT_FAULT_CLOCK_OFFSET": off,
			"CALLOUT_FAULT_CLOCK_UNCORRECTED": uncorrected}
		reps = append(reps, proctest.StartProxy(t, bin, cfg, proctest.ProxyOptions{Name: fmt.Sprintf("r%d", i), Env: env}))
	}
	c := skewClient(t)

	// 40 keyed writes, asynchronous and synchronous, alternately to the
	// replica ahead and the one behind.
	acc, refused := c.postAsync(20, 4, "skew-api", "async", func(i int) string { return reps[i%2].URL }, nil)
	if refused != 0 || len(acc) != 20 {
		t.Fatalf("async writes: %d accepted, %d not", len(acc), refused)
	}
	for i := range 20 {
		key := fmt.Sprintf("sync-%d", i)
		st, hdr, body, err := c.do(http.MethodPost, reps[i%2].URL+"/callout/skew-api/charges",
			http.Header{"Idempotency-Key": {key}, "Content-Type": {"application/json"}}, `{}`)
		if err != nil {
			t.Fatalf("sync write %s: %v", key, err)
		}
		// The first attempt's 503 is answered 202: the retry is scheduled.
		if st != http.StatusAccepted {
			t.Fatalf("sync write %s = %d %s", key, st, body)
		}
		acc = append(acc, accepted{ID: hdr.Get("Callout-Id"), Key: key})
	}
	final := c.waitFinal(t, reps[0].URL, acc, 60*time.Second)
	wantAll(t, final, policy.Succeeded)
	up.CheckNoOverlap(t)
	// Nothing sent again after its success: exactly the 503 and the 200.
	for _, a := range acc {
		if n := up.Attempts(a.Key); n != 2 {
			t.Errorf("key %s reached the upstream %d times, want 2 (a 503, then the 200)", a.Key, n)
		}
		for _, at := range final[a.ID].Attempts {
			if at.DurationMs < 250 || at.DurationMs > 5000 {
				t.Errorf("callout %s attempt %d took %d ms by its record, want about 300", a.ID, at.N, at.DurationMs)
			}
		}
	}

	// Open probe-api's breaker through the replica behind (three sequential
	// failing reads: on its own clock the probe time would have passed for
	// the replica ahead at once), then read it from both replicas for 9 s:
	// one probe at a time, each at least a probe interval after the
	// previous attempt ended.
	for range 3 {
		if _, _, _, err := c.do(http.MethodGet, reps[1].URL+"/callout/probe-api/x", nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	stop := time.Now().Add(9 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				_, _, _, _ = c.do(http.MethodGet, reps[w%2].URL+"/callout/probe-api/x", nil, "")
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	reqs := probes.Requests("")
	slices.SortFunc(reqs, func(a, b proctest.Request) int { return a.Start.Compare(b.Start) })
	if peak := probes.InFlight.Peak(); peak != 1 {
		t.Errorf("probe-api had %d requests in flight at once, want 1 (one probe at a time)", peak)
	}
	if len(reqs) < 5 {
		t.Fatalf("probe-api saw %d requests, want the 3 that open it and probes after", len(reqs))
	}
	const tol = 300 * time.Millisecond
	for i := 3; i < len(reqs); i++ {
		if gap := reqs[i].Start.Sub(reqs[i-1].End); gap < probeInterval-tol {
			t.Errorf("probe %d started %v after the previous attempt ended, want ≥ %v", i-2, gap, probeInterval)
		}
	}
	t.Logf("skew-api: %d callouts, %d upstream requests; probe-api: %d probes in 9 s, peak in flight %d",
		len(acc), up.Hits(), len(reqs)-3, probes.InFlight.Peak())
}

// skewClient is a client whose token is valid for both skewed replicas:
// issued 5 minutes ago, for an hour, so neither replica's clock (90 s off)
// finds it not yet valid or expired.
func skewClient(t *testing.T) *client {
	t.Helper()
	c := newClient(t)
	tok, err := auth.MintHS256([]byte(testSecret), issuer, "callout-proxy", "005000000000001AAA",
		time.Hour, time.Now().Add(-5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c.token = "Bearer " + tok
	return c
}
