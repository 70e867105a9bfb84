package salesforce

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestReprocessTwoReplicasAtOnce: two replicas polling Salesforce at the
// same moment reprocess each requested record exactly once — whether the
// poll lock keeps the second out, or the lock lapsed and both poll (both
// replicas then hold it under one token, as a replica does whose lock
// expired while it polled). The dead letters have no Idempotency-Key, so
// the replay service itself would replay them twice; the request claims
// keep it to one.
func TestReprocessTwoReplicasAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name            string
		owners          [2]string
		polled, skipped int
	}{
		{"one holds the poll lock", [2]string{"replica-a", "replica-b"}, 1, 0},
		{"the lock lapsed: both poll", [2]string{"replica-a", "replica-a"}, 2, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			roots := e.settledDeadLetters(3)
			for _, root := range roots {
				e.request(root)
			}
			e.clk.Advance(time.Second)
			counter := newCounting(e.replays("replays"))
			var reps [2]*Reprocessor
			for i, owner := range tt.owners {
				_, reps[i] = e.replica(owner, counter)
			}
			queries, calls := e.emu.Calls("query"), e.emu.APICalls()
			got := pollAtOnce(t, reps[:]...)
			polled, replayed, skipped := 0, 0, 0
			var poller *Reprocessor
			for i, r := range got {
				if r.Polled {
					polled, poller = polled+1, reps[i]
				}
				replayed, skipped = replayed+r.Replayed, skipped+r.Skipped
			}
			if polled != tt.polled || replayed != 3 || skipped != tt.skipped {
				t.Fatalf("reports = %+v, want %d polled, 3 replayed and %d skipped in all", got, tt.polled, tt.skipped)
			}
			if n := e.emu.Calls("query") - queries; n != 2*tt.polled {
				t.Errorf("%d queries, want %d: the Discarded and the reprocess poll of each poll", n, 2*tt.polled)
			}
			if n := e.emu.APICalls() - calls; n != int64(tt.polled) {
				t.Errorf("%d API calls, want %d: both queries of a poll in one Composite call", n, tt.polled)
			}
			counter.wantOnce(t, roots)
			// Until the Reprocessing writes land, the records still show
			// Reprocess Requested: a later poll skips them.
			if r := poll(t, poller); r.Replayed != 0 || r.Skipped != 3 {
				t.Errorf("a later poll: %+v, want the 3 requests skipped", r)
			}
			e.drain()
			for _, root := range roots {
				r := e.record(root)
				chain, _ := r["Replay_Callout_Id__c"].(string)
				c, err := e.store.Get(ctxT(t), chain)
				if r["Status__c"] != policy.RecordReprocessing || err != nil || c.ReplayOf != root || c.State != policy.Scheduled {
					t.Errorf("record %s: %v (chain %+v, %v), want Reprocessing naming a scheduled replay", root, r, c, err)
				}
			}
			if poll(t, poller).Requests != 0 {
				t.Error("records marked Reprocessing are still polled")
			}
		})
	}
}

// pollAtOnce starts a Poll of each reprocessor at the same moment and
// returns their reports.
func pollAtOnce(t *testing.T, reps ...*Reprocessor) []ReprocessReport {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	got := make([]ReprocessReport, len(reps))
	for i, p := range reps {
		wg.Go(func() {
			<-start
			var err error
			if got[i], err = p.Poll(ctxT(t)); err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return got
}

// TestReprocessExpiredCopy: a request for a record whose proxy copy is
// gone (its retention ended) marks the record Expired.
func TestReprocessExpiredCopy(t *testing.T) {
	e := newEnv(t)
	root := e.deadLetters("orders", 1)[0]
	e.drain()
	e.mini.FastForward(31 * day) // the copy's TTL ends; no expiry sweep ran
	e.clk.Advance(31 * day)
	e.request(root)
	counter := newCounting(e.replays("replays"))
	_, p := e.replica("replica-a", counter)
	if r := poll(t, p); r.Answered != 1 || r.Replayed != 0 || counter.count(root) != 1 {
		t.Fatalf("poll = %+v, replays tried %d", r, counter.count(root))
	}
	e.drain()
	if s := e.record(root)["Status__c"]; s != policy.RecordExpired {
		t.Errorf("status = %v, want Expired", s)
	}
}

// TestReprocessAnswers: how a request is answered when the replay makes
// no new chain, and that the record's latest copy is what is replayed.
func TestReprocessAnswers(t *testing.T) {
	type setup struct {
		chain  string // the record's latest replay chain ("" none)
		want   string // the record's status afterwards
		replay string // its Replay_Callout_Id__c afterwards ("" none)
		calls  []string
	}
	tests := []struct {
		name    string
		prepare func(e *env, root string, f *fakeReplayer) setup
	}{
		{"replayed", func(e *env, root string, f *fakeReplayer) setup {
			f.ReplayOneFn = func(string) (string, error) { return "replay-1", nil }
			return setup{want: policy.RecordReprocessing, replay: "replay-1", calls: []string{root}}
		}},
		{"copy discarded", func(e *env, root string, f *fakeReplayer) setup {
			if err := e.store.Discard(ctxT(e.t), root); err != nil {
				e.t.Fatal(err)
			}
			f.ReplayOneFn = func(string) (string, error) { return "", policy.ErrReplayNotDeadLetter }
			return setup{want: policy.RecordExpired, calls: []string{root}}
		}},
		{"the latest chain still runs", func(e *env, root string, f *fakeReplayer) setup {
			chain := enqueueChain(e, root)
			f.ReplayOneFn = func(string) (string, error) { return "", policy.ErrReplayNotDeadLetter }
			return setup{chain: chain, want: policy.RecordReprocessing, replay: chain, calls: []string{chain}}
		}},
		{"a running chain holds the key", func(e *env, root string, f *fakeReplayer) setup {
			chain := enqueueChain(e, root)
			f.ReplayOneFn = func(string) (string, error) { return chain, policy.ErrReplayAlreadyReplayed }
			return setup{want: policy.RecordReprocessing, replay: chain, calls: []string{root}}
		}},
		{"the latest chain succeeded", func(e *env, root string, f *fakeReplayer) setup {
			chain := e.scheduled("orders", 1, replayOf(root), succeeded())[0]
			f.ReplayOneFn = func(string) (string, error) { return "", policy.ErrReplayNotDeadLetter }
			return setup{want: policy.RecordReprocessed, replay: chain, calls: []string{chain}}
		}},
		{"superseded: the newer dead letter is replayed", func(e *env, root string, f *fakeReplayer) setup {
			f.ReplayOneFn = func(id string) (string, error) {
				if id == root {
					return "newer-dead-letter", policy.ErrReplaySuperseded
				}
				return "replay-2", nil
			}
			return setup{want: policy.RecordReprocessing, replay: "replay-2", calls: []string{root, "newer-dead-letter"}}
		}},
		{"endpoint disabled", func(e *env, root string, f *fakeReplayer) setup {
			f.ReplayOneFn = func(string) (string, error) { return "", policy.ErrReplayEndpointDisabled }
			return setup{want: policy.RecordFailedAgain, calls: []string{root}}
		}},
		{"endpoint not configured", func(e *env, root string, f *fakeReplayer) setup {
			f.ReplayOneFn = func(string) (string, error) { return "", policy.ErrReplayUnknownEndpoint }
			return setup{want: policy.RecordFailedAgain, calls: []string{root}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			root := e.deadLetters("orders", 1)[0]
			e.drain()
			f := &fakeReplayer{}
			s := tt.prepare(e, root, f)
			e.drain()
			e.clk.Advance(time.Minute)
			if s.chain != "" {
				e.emu.Set(t, FailedCalloutObject, ExternalIDField, root, "Replay_Callout_Id__c", s.chain)
			}
			e.emu.Set(t, FailedCalloutObject, ExternalIDField, root, "LastModifiedById", "005000000000042AAA")
			e.request(root)
			_, p := e.replica("replica-a", f)
			if r := poll(t, p); r.Requests != 1 || r.Replayed+r.Answered != 1 {
				t.Fatalf("poll = %+v", r)
			}
			e.drain()
			r := e.record(root)
			if got, _ := r["Replay_Callout_Id__c"].(string); r["Status__c"] != s.want || got != s.replay {
				t.Errorf("record: status %v, replay %q; want %s, %q", r["Status__c"], got, s.want, s.replay)
			}
			if len(f.targets) != len(s.calls) || f.targets[0] != s.calls[0] || f.targets[len(f.targets)-1] != s.calls[len(s.calls)-1] {
				t.Errorf("replayed %v, want %v", f.targets, s.calls)
			}
			if f.by[0] != "salesforce:005000000000042AAA" {
				t.Errorf("by = %q, want the admin who requested it", f.by[0])
			}
		})
	}
}

// enqueueChain enqueues a replay chain of root (scheduled, not yet run).
func enqueueChain(e *env, root string) string {
	e.t.Helper()
	nc := newCallout("orders")
	nc.IdempotencyKey, nc.ReplayOf = "", root
	res, err := e.store.Enqueue(ctxT(e.t), nc, policy.EnqueueOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.ID
}

// TestReprocessRetries: a request whose endpoint's backlog is full, or
// that met a store failure, is tried again once its claim lapses, and
// does not hold up the requests after it (backlog) or lose its place
// (the watermark stays at or before it).
func TestReprocessRetries(t *testing.T) {
	for _, tt := range []struct {
		name    string
		failure error
		pollErr bool
		// meanwhile is what a poll replays while the claim holds: the
		// request after the failed one, when the failure stopped the poll.
		meanwhile int
	}{
		{"backlog full", policy.ErrReplayBacklogFull, false, 0},
		{"store unavailable", policy.ErrUnavailable, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			roots := e.settledDeadLetters(2)
			e.request(roots[0])
			stamp := e.clk.Now()
			e.clk.Advance(time.Second)
			e.request(roots[1])
			fail := true
			f := &fakeReplayer{ReplayOneFn: func(id string) (string, error) {
				if id == roots[0] && fail {
					return "", tt.failure
				}
				return "replay-of-" + id[:6], nil
			}}
			_, p := e.replica("replica-a", f)
			rep, err := p.Poll(ctxT(t))
			if (err != nil) != tt.pollErr || !errors.Is(err, tt.failure) && tt.pollErr {
				t.Fatalf("poll error = %v", err)
			}
			if mark, _ := e.outbox.Watermark(ctxT(t), reprocessPoll); mark.After(stamp) {
				t.Errorf("watermark %v passed the request at %v", mark, stamp)
			}
			if !tt.pollErr && (rep.Deferred != 1 || rep.Replayed != 1) {
				t.Errorf("poll = %+v, want 1 deferred, the next one replayed", rep)
			}
			fail = false
			if r := poll(t, p); r.Replayed != tt.meanwhile {
				t.Errorf("replayed %d while the claim holds, want %d", r.Replayed, tt.meanwhile)
			}
			e.mini.FastForward(ReprocessLease)
			poll(t, p)
			e.drain()
			for _, root := range roots {
				if s := e.record(root)["Status__c"]; s != policy.RecordReprocessing {
					t.Errorf("%s: status %v, want Reprocessing", root, s)
				}
			}
			if got := len(f.targets); got != 3 {
				t.Errorf("%d replays tried (%v), want 3: one failed, then each once", got, f.targets)
			}
		})
	}
}
