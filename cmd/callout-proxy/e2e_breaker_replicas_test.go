//go:build unix

package main

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// The replica tests scale contract §6's minutes down to seconds: the breaker
// opens after 3 failures and waits replicaInterval before its probe.
const (
	replicaInterval = 2 * time.Second
	// probeSleep is how long the upstream takes to answer the probe.
	probeSleep = 500 * time.Millisecond
	// replicaTick is replica B's request pace (the contract's "every minute" at 5 min).
	replicaTick = 400 * time.Millisecond
)

// breakerOpen is the problem type of a read refused by an open breaker.
const breakerOpen = problem.TypeBase + string(problem.BreakerOpen)

// TestE2EBreakerAcrossReplicas runs three processes of the real binary on
// one real Redis server: the breaker is shared, its probe is taken exactly
// once, and one replica's traffic neither hides nor delays another's
// opening (contract §6).
func TestE2EBreakerAcrossReplicas(t *testing.T) {
	t.Parallel()
	bin := replicaBinary(t)
	redisURL := proctest.StartRedis(t, false).URL
	probeUp := newTimedUpstream(t, "fail", map[string]func(http.ResponseWriter){
		"fail": answerStatus(503), "ok": answerStatus(200),
		"slow500": func(w http.ResponseWriter) { time.Sleep(probeSleep); w.WriteHeader(500) },
	})
	tickUp := newTimedUpstream(t, "fail", map[string]func(http.ResponseWriter){
		"fail": answerStatus(503), "ok": answerStatus(200),
	})
	settings := []string{loopbackNets, singleTenant, "breaker_failures: 3", "breaker_probe_interval: 2s"}
	cfg := devConfig(proctest.Endpoint("probe-api", probeUp.URL, settings...)+
		proctest.Endpoint("tick-api", tickUp.URL, settings...)) + "redis:\n  url: " + redisURL + "\n"
	reps := []*proxyUnderTest{replica(t, bin, cfg), replica(t, bin, cfg), replica(t, bin, cfg)}
	t.Run("one probe among 50 concurrent requests", func(t *testing.T) { oneProbe(t, reps, probeUp) })
	t.Run("another replica's traffic does not delay the probe", func(t *testing.T) { probeOnTime(t, reps, tickUp) })
}

// openOn opens endpoint's breaker with 3 failing reads through rep and
// returns its state as another replica reads it.
func openOn(t *testing.T, rep, other *proxyUnderTest, endpoint, authz string) (openedAt time.Time) {
	t.Helper()
	for range 3 {
		code, out, typ, err := rawGet(rep.URL+"/callout/"+endpoint+"/x", authz)
		if err != nil || code != 503 || out != string(policy.Retryable) || typ != "" {
			t.Fatalf("failing read = %d %s %q %v, want the upstream's 503", code, out, typ, err)
		}
	}
	doc := endpointDoc(t, other.AdminURL, endpoint)
	if doc.Breaker != "open" || doc.OpenedAt == nil || doc.NextProbeAt == nil ||
		!doc.NextProbeAt.Equal(doc.OpenedAt.Add(replicaInterval)) {
		t.Fatalf("%s after 3 failures = %+v, want open with the probe one interval after opened_at", endpoint, doc)
	}
	return *doc.OpenedAt
}

// refusedEverywhere asserts that a read through every replica is refused
// with breaker-open and returns the latest time one was sent.
func refusedEverywhere(t *testing.T, reps []*proxyUnderTest, endpoint, authz string) time.Time {
	t.Helper()
	var last time.Time
	for i, r := range reps {
		last = time.Now()
		code, _, typ, err := rawGet(r.URL+"/callout/"+endpoint+"/x", authz)
		if err != nil || code != 503 || typ != breakerOpen {
			t.Fatalf("read through replica %d = %d %q %v, want 503 breaker-open", i, code, typ, err)
		}
	}
	return last
}

// oneProbe: replica A opens the breaker at T; at T + interval 50 concurrent
// reads through the three replicas, while the upstream sleeps and then
// answers 500, reach the upstream exactly once; the breaker then stays open
// until about T + 2 × interval, and the next probe closes it. opened_at is
// written once, by A: only A counts the opening.
func oneProbe(t *testing.T, reps []*proxyUnderTest, up *timedUpstream) {
	authz := bearer(t, testIssuer)
	T := openOn(t, reps[0], reps[1], "probe-api", authz)
	if sent := refusedEverywhere(t, reps, "probe-api", authz); !sent.Before(T.Add(replicaInterval)) {
		t.Fatalf("the refusals were sent at %v, not before the probe time", sent)
	}

	up.set("slow500")
	untilTime(T.Add(replicaInterval))
	type result struct {
		code     int
		out, typ string
		err      error
	}
	results := make([]result, 50)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			<-start
			r := &results[i]
			r.code, r.out, r.typ, r.err = rawGet(reps[i%3].URL+"/callout/probe-api/x", authz)
		})
	}
	close(start)
	wg.Wait()
	probes, refused := 0, 0
	for _, r := range results {
		switch {
		case r.err == nil && r.code == 500 && r.out == string(policy.Retryable) && r.typ == "":
			probes++
		case r.err == nil && r.code == 503 && r.typ == breakerOpen:
			refused++
		default:
			t.Errorf("unexpected answer %+v", r)
		}
	}
	if n := len(up.arrivals("slow500")); n != 1 || probes != 1 || refused != 49 {
		t.Fatalf("upstream hits %d, probes answered %d, refused %d: want exactly 1, 1, 49", n, probes, refused)
	}

	doc := endpointDoc(t, reps[2].AdminURL, "probe-api")
	next := *doc.NextProbeAt
	if doc.Breaker != "open" || !doc.OpenedAt.Equal(T) || next.Before(T.Add(2*replicaInterval)) ||
		next.After(T.Add(2*replicaInterval+probeSleep+time.Second)) {
		t.Fatalf("after the failed probe = %+v, want open, opened_at %v kept, next probe about T + 2 x interval", doc, T)
	}
	if sent := refusedEverywhere(t, reps, "probe-api", authz); !sent.Before(next) {
		t.Fatalf("the refusals were sent at %v, not before the next probe at %v", sent, next)
	}
	if n := len(up.arrivals("slow500")); n != 1 {
		t.Fatalf("upstream hits = %d after the failed probe, want still 1", n)
	}

	up.set("ok")
	untilTime(next)
	if code, _, typ, err := rawGet(reps[2].URL+"/callout/probe-api/x", authz); err != nil || code != 200 {
		t.Fatalf("read after the next probe time = %d %q %v, want the probe's 200", code, typ, err)
	}
	if doc := endpointDoc(t, reps[0].AdminURL, "probe-api"); doc.Breaker != "closed" || doc.ConsecutiveFailures != 0 {
		t.Fatalf("after the successful probe = %+v, want closed", doc)
	}
	for i, want := range []float64{1, 0, 0} {
		if got := metricValue(t, reps[i], "callout_breaker_transitions_total", `endpoint="probe-api"`, `to="open"`); got != want {
			t.Errorf("replica %d counted %v openings, want %v (only the opener)", i, got, want)
		}
	}
	if got := metricValue(t, reps[2], "callout_breaker_transitions_total", `endpoint="probe-api"`, `to="closed"`); got != 1 {
		t.Errorf("the probing replica counted %v closings, want 1", got)
	}
}

// probeOnTime: replica A opens the breaker at T; replica B keeps sending a
// read every tick; its reads are refused until T + interval, and the first
// one after that is the probe — B's traffic neither moves the probe time
// nor the opening time that A wrote.
func probeOnTime(t *testing.T, reps []*proxyUnderTest, up *timedUpstream) {
	authz := bearer(t, testIssuer)
	T := openOn(t, reps[0], reps[1], "tick-api", authz)
	probeAt := T.Add(replicaInterval)
	up.set("ok")
	refused := 0
	for {
		code, _, typ, err := rawGet(reps[1].URL+"/callout/tick-api/x", authz)
		if err == nil && code == 200 {
			break
		}
		if err != nil || code != 503 || typ != breakerOpen {
			t.Fatalf("read through B = %d %q %v, want 503 breaker-open or the probe's 200", code, typ, err)
		}
		refused++
		if refused == 2 {
			doc := endpointDoc(t, reps[2].AdminURL, "tick-api")
			if !doc.OpenedAt.Equal(T) || !doc.NextProbeAt.Equal(probeAt) {
				t.Fatalf("while B is refused = %+v, want opened_at %v and the probe at %v unchanged", doc, T, probeAt)
			}
		}
		if time.Now().After(probeAt.Add(5 * time.Second)) {
			t.Fatalf("no probe 5 s after the probe time %v", probeAt)
		}
		time.Sleep(replicaTick) // B's traffic pace
	}
	hits := up.arrivals("ok")
	if len(hits) != 1 || hits[0].Before(probeAt) || hits[0].After(probeAt.Add(replicaTick+time.Second)) {
		t.Fatalf("probe reached the upstream at %v, want once, within a tick of %v", hits, probeAt)
	}
	if want := int(replicaInterval/replicaTick) - 2; refused < want {
		t.Errorf("B was refused %d times before the probe, want at least %d", refused, want)
	}
	if doc := endpointDoc(t, reps[2].AdminURL, "tick-api"); doc.Breaker != "closed" {
		t.Errorf("after the probe = %+v, want closed", doc)
	}
}
