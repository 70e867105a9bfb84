package salesforce

import (
	"context"
	"sync"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// replica is another proxy replica on the env's store, emulator and clock:
// its own writer (owner names it in the poll lock and the request claims)
// and reprocessor over rp.
func (e *env) replica(owner string, rp Replayer) (*Writer, *Reprocessor) {
	e.t.Helper()
	w, err := NewWriter(WriterOptions{API: e.client, Store: e.store, Outbox: e.outbox, Salesforce: *e.cfg.Salesforce,
		Endpoints: endpointsOf(e.cfg), DeadLetterRetention: e.cfg.Policy.DeadLetterRetention,
		Now: e.clk.Now, Rand: func() float64 { return 0.5 }, Owner: owner,
		Logger: e.logger()})
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := NewReprocessor(ReprocessOptions{Writer: w, Replayer: rp, Requests: e.outbox, Marks: e.marks()})
	if err != nil {
		e.t.Fatal(err)
	}
	return w, p
}

// replays is a replay service on the env's store and clock, as one
// replica runs it (no OnReplay hook: the poller marks Reprocessing
// itself).
func (e *env) replays(owner string) *replay.Service {
	return replay.New(replay.Options{Config: e.cfg, Store: e.store, DeadLetters: e.marks(), Now: e.clk.Now, Owner: owner,
		Jobs: jobs.New(e.rdb, jobs.Options{PinScriptTime: true, Now: e.clk.Now})})
}

// request sets the record of root to Reprocess Requested, as an admin's
// Reprocess action does (its SystemModstamp moves).
func (e *env) request(root string) {
	e.t.Helper()
	e.setStatus(root, policy.RecordReprocessRequested)
}

// setStatus sets Status__c of root's record to status in Salesforce, as an
// admin does (its SystemModstamp moves).
func (e *env) setStatus(root, status string) {
	e.t.Helper()
	e.emu.Set(e.t, FailedCalloutObject, ExternalIDField, root, "Status__c", status)
}

// countingReplayer is the replay service, as the composition root gives
// it, counting the calls per dead-letter id. Safe for concurrent
// use; several replicas may share one.
type countingReplayer struct {
	mu    sync.Mutex
	calls map[string]int
	svc   *replay.Service
}

var _ Replayer = (*countingReplayer)(nil)

func newCounting(svc *replay.Service) *countingReplayer {
	return &countingReplayer{calls: map[string]int{}, svc: svc}
}

func (c *countingReplayer) ReplayOne(ctx context.Context, id, by string) (string, error) {
	c.mu.Lock()
	c.calls[id]++
	c.mu.Unlock()
	return c.svc.ReplayOne(ctx, id, by)
}

// count returns how often id was replayed.
func (c *countingReplayer) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// fakeReplayer answers ReplayOne with its Fn and records each call's
// target and by.
type fakeReplayer struct {
	ReplayOneFn func(id string) (string, error)
	mu          sync.Mutex
	targets     []string
	by          []string
}

var _ Replayer = (*fakeReplayer)(nil)

func (f *fakeReplayer) ReplayOne(_ context.Context, id, by string) (string, error) {
	f.mu.Lock()
	f.targets, f.by = append(f.targets, id), append(f.by, by)
	f.mu.Unlock()
	return f.ReplayOneFn(id)
}

// poll runs one Poll of p and fails the test on an error.
func poll(t *testing.T, p *Reprocessor) ReprocessReport {
	t.Helper()
	rep, err := p.Poll(ctxT(t))
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return rep
}

// marks returns the dead-letter store (replay marks) of the env's Redis,
// on its clock, as the composition root wires it (proxy/app).
func (e *env) marks() *deadletters.Store {
	return deadletters.New(e.rdb, e.store, deadletters.Options{Now: e.clk.Now, PinScriptTime: true})
}

// wantOnce fails t unless each root was replayed exactly once.
func (c *countingReplayer) wantOnce(t *testing.T, roots []string) {
	t.Helper()
	for _, root := range roots {
		if n := c.count(root); n != 1 {
			t.Errorf("%s replayed %d times, want 1", root, n)
		}
	}
}
