//go:build unix

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// replicaBinary builds this command's binary for a test that runs it as
// several processes on one redis-server of its own (proctest.StartRedis).
// Such a test is skipped on the embedded store alone
// (proctest.SkipOnEmbeddedStore): it runs with the real-Redis suite.
func replicaBinary(t *testing.T) string {
	t.Helper()
	proctest.SkipOnEmbeddedStore(t)
	bin, err := proctest.BuildBinary(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// replica runs the binary bin as a separate process on config yaml
// with testEnv's environment (proctest.StartProxy: it gets SIGTERM when the
// test ends and must exit 0) and returns it as a proxyUnderTest (URL,
// AdminURL, logs; its stop is not used).
func replica(t *testing.T, bin, yaml string) *proxyUnderTest {
	t.Helper()
	p := proctest.StartProxy(t, bin, yaml, proctest.ProxyOptions{Env: testEnv(), CleanExit: true})
	return &proxyUnderTest{URL: p.URL, AdminURL: p.AdminURL, logs: &p.Logs}
}

// timedUpstream is an upstream whose answer the test switches, recording
// when each request arrived and in which phase.
type timedUpstream struct {
	*proctest.Upstream
	mu      sync.Mutex
	phase   string
	byPhase map[string][]time.Time // phase -> arrival times
	reply   map[string]func(w http.ResponseWriter)
}

// newTimedUpstream starts one with the given replies per phase; the first
// phase is start.
func newTimedUpstream(t *testing.T, start string, reply map[string]func(w http.ResponseWriter)) *timedUpstream {
	u := &timedUpstream{phase: start, byPhase: map[string][]time.Time{}, reply: reply}
	u.Upstream = proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		u.mu.Lock()
		ph := u.phase
		u.byPhase[ph] = append(u.byPhase[ph], time.Now())
		u.mu.Unlock()
		u.reply[ph](w)
	})
	return u
}

// set switches the phase.
func (u *timedUpstream) set(phase string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.phase = phase
}

// arrivals is a copy of the arrival times of phase.
func (u *timedUpstream) arrivals(phase string) []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.byPhase[phase]...)
}

// answerStatus answers code at once.
func answerStatus(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

// rawGet sends GET url with the Authorization value and returns the status,
// the Callout-Outcome and problem type ("" for an upstream answer). It is
// safe to call from any goroutine (no t.Fatal).
func rawGet(url, authorization string) (status int, outcome, problemType string, err error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Authorization", authorization)
	resp, err := noRedirectClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", "", err
	}
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		var pb struct{ Type string }
		_ = json.Unmarshal(body, &pb)
		problemType = pb.Type
	}
	return resp.StatusCode, resp.Header.Get("Callout-Outcome"), problemType, nil
}

// untilTime sleeps until at (waiting for an interval to pass, not an
// assertion).
func untilTime(at time.Time) { time.Sleep(time.Until(at)) }
