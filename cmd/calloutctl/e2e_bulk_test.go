package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// jobCreated finds the job id in calloutctl's "replay job ID created" note.
var jobCreated = regexp.MustCompile(`replay job (\S+) created`)

// TestBulkReplayPacedShowsProgressAndCancels: a bulk replay of 1,000 dead
// letters at --rate 200 is paced by the rate (on the injected clock: the
// k-th replay is created at start + k × 5 ms), shows a progress bar on a
// terminal, and `replay-jobs cancel` stops it part-way and says how many
// were sent.
func TestBulkReplayPacedShowsProgressAndCancels(t *testing.T) {
	p := startProxy(t)
	p.seedMany(t, "pay-api", "bulk", 1000)
	p.up.ok.Store(true)
	before := len(p.up.received())
	start := p.clk.Now()
	// The 401st send is due at start + 400 × 5 ms = 2 s: it waits there.
	blocked, release := p.clk.GateAt(start.Add(2 * time.Second))
	defer release()

	var errw proctest.LogBuffer
	done := make(chan ctlResult, 1)
	go func() {
		done <- p.ctlWith(t, true, "", &errw, "replay", "--endpoint", "pay-api", "--rate", "200", "--yes")
	}()
	<-blocked
	eventually(t, "the progress bar at 400/1000", func() bool { return strings.Contains(errw.String(), "400/1000") })
	m := jobCreated.FindStringSubmatch(errw.String())
	if m == nil {
		t.Fatalf("no job id in stderr:\n%s", errw.String())
	}
	id := m[1]
	p.ctl(t, "", "replay-jobs", "get", id).want(t, exitOK, "running", "400 of 1000: 400 sent")

	cancelled := make(chan ctlResult, 1)
	go func() { cancelled <- p.ctl(t, "", "replay-jobs", "cancel", id) }()
	eventually(t, "the job cancelling", func() bool {
		j, err := p.jobs.Job(t.Context(), id)
		return err == nil && j.State == policy.JobCancelling
	})
	release()
	(<-cancelled).want(t, exitOK, "replay job "+id+" cancelled by ops: 400 of 1000 sent")
	(<-done).want(t, exitPartial, "replay job "+id+" cancelled by ops: 400 of 1000 sent")

	r := p.ctl(t, "", "-o", "json", "replay-jobs", "get", id, "--items")
	r.want(t, exitOK)
	var out struct {
		Items []api.ReplayJobItemDoc `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Items) != 1000 {
		t.Fatalf("items: %v (%d)", err, len(out.Items))
	}
	for k, it := range out.Items {
		if k >= 400 {
			if it.Status != "skipped" || it.Detail != "not_sent" || it.ReplayID != "" {
				t.Fatalf("item %d after the cancel = %+v", k, it)
			}
			continue
		}
		c, err := p.store.Get(t.Context(), it.ReplayID)
		if it.Status != "sent" || err != nil {
			t.Fatalf("item %d = %+v (%v)", k, it, err)
		}
		if want := start.Add(time.Duration(k) * 5 * time.Millisecond); !c.CreatedAt.Equal(want) {
			t.Fatalf("replay %d created at start+%v, want start+%v", k, c.CreatedAt.Sub(start), want.Sub(start))
		}
	}
	p.idle(t, "pay-api")
	got := countKeys(p.up.received()[before:])
	if len(got) != 400 {
		t.Fatalf("upstream received %d distinct keys, want 400", len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("key %s sent %d times", k, n)
		}
	}
}
