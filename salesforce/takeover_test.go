package salesforce

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// stuckAPI is a Salesforce whose Composite calls never answer (a replica
// frozen or killed mid-call): entered is closed when the first one starts.
type stuckAPI struct {
	API
	entered chan struct{}
	release chan struct{}
}

func (s *stuckAPI) Composite(ctx context.Context, subs []sfapi.Subrequest) ([]sfapi.SubResult, error) {
	select {
	case <-s.entered:
	default:
		close(s.entered)
	}
	<-s.release
	return nil, context.Canceled
}

// flushLeaseEnd reads the end of the flush lease (Unix ms) from its key.
func flushLeaseEnd(t *testing.T, e *env) time.Time {
	t.Helper()
	v, err := e.rdb.Get(ctxT(t), keyspace.SFFlush).Result()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(v[strings.IndexByte(v, '|')+1:], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(n)
}

// TestDeadWriterCostsOneLease (contract §8, docs/salesforce.md "A replica
// dies mid-batch"): a writer whose Composite call is in flight renews the
// flush lease and its entries' leases, so no other replica takes them
// however long the call takes; once it stops renewing (it died), a survivor
// writes the batch one lease later.
func TestDeadWriterCostsOneLease(t *testing.T) {
	e := newEnv(t)
	ids := e.deadLetters("orders", 3)
	const lease = 300 * time.Millisecond
	stuck := &stuckAPI{API: e.client, entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(stuck.release) })
	frozen, err := NewWriter(WriterOptions{API: stuck, Store: e.store, Outbox: e.outbox, Salesforce: *e.cfg.Salesforce,
		Endpoints: endpointsOf(e.cfg), Now: e.clk.Now, Owner: "frozen", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	survivor := e.newWriter()
	ctx, kill := context.WithCancel(ctxT(t))
	go func() { _, _ = frozen.Round(ctx) }()
	<-stuck.entered

	// In flight for several leases: each renewal moves the flush lease
	// past the clock, and the survivor gets nothing.
	for range 3 {
		e.clk.Advance(lease)
		for !flushLeaseEnd(t, e).After(e.clk.Now()) {
			time.Sleep(lease / 10) // waiting for the renewal, never asserting on its speed
		}
		if rep, err := survivor.Round(ctxT(t)); err != nil || !rep.Busy || rep.Claimed != 0 {
			t.Fatalf("round while the batch is in flight and renewed: %+v, %v", rep, err)
		}
	}

	// It dies: nothing renews any more, and one lease later the survivor
	// takes the flush lease and the claimed entries, and writes them.
	kill()
	e.clk.Advance(lease)
	rep, err := survivor.Round(ctxT(t))
	if err != nil || rep.Busy || rep.Claimed < len(ids) || rep.Done != rep.Claimed {
		t.Fatalf("survivor's round one lease after the writer died: %+v, %v", rep, err)
	}
	for _, id := range ids {
		if _, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, id); !ok {
			t.Errorf("dead letter %s not in Salesforce after the takeover", id)
		}
	}
}

// TestOldestDueGauge: callout_salesforce_outbox_oldest_due_seconds is
// computed at scrape time: how long the oldest due entry has waited while
// no writer sends it, 0 once it is written.
func TestOldestDueGauge(t *testing.T) {
	e := newEnv(t)
	e.deadLetters("orders", 2)
	e.clk.Advance(90 * time.Second)
	if got := testutil.ToFloat64(e.metrics.OutboxOldestDue); got < 90 {
		t.Fatalf("oldest due = %v s, want at least the 90 s no writer ran", got)
	}
	e.drain()
	if got := testutil.ToFloat64(e.metrics.OutboxOldestDue); got != 0 {
		t.Fatalf("oldest due after the drain = %v s, want 0", got)
	}
	if got := testutil.ToFloat64(e.metrics.OutboxItems); got != 0 {
		t.Fatalf("outbox items after the drain = %v, want 0", got)
	}
}

// TestRecordsKeptUpToTheCap: the writer keeps the records of queued
// writes past their retention (Writer.KeepPending), and once they were
// kept KeepCap, it leaves them to expire and reports them in
// callout_salesforce_outbox_records_at_cap.
func TestRecordsKeptUpToTheCap(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.Policy.DeadLetterRetention = 30 * time.Minute })
	ids := e.deadLetters("orders", 2)
	e.writer.KeepPending(ctxT(t))
	rec, _ := keyspace.Callout(ids[0])
	if d := e.mini.TTL(rec); d <= 30*time.Minute {
		t.Fatalf("record TTL after keep = %v, want it raised to %v", d, KeepMargin)
	}
	e.clk.Advance(KeepCap)
	e.mini.FastForward(31 * time.Minute) // less than KeepMargin left again
	e.writer.KeepPending(ctxT(t))
	if got := testutil.ToFloat64(e.metrics.RecordsAtCap); got != float64(len(ids)) {
		t.Fatalf("records at cap = %v, want %d", got, len(ids))
	}
	if !strings.Contains(e.logs.String(), "left to expire") {
		t.Error("no error line for the records left to expire")
	}
}
