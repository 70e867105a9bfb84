package salesforce

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestLingerThenFlush: Tick sends a batch that is not full only once its
// first entry waited batch_linger, and one that is full at once.
func TestLingerThenFlush(t *testing.T) {
	e := newEnv(t)
	e.deadLetters("orders", 2)
	rep, wait, err := e.writer.Tick(ctxT(t))
	if err != nil || rep.Calls != 0 || wait <= 0 || wait > e.cfg.Salesforce.BatchLinger {
		t.Fatalf("first tick: %+v, wait %v, %v: want no call, wait the linger", rep, wait, err)
	}
	e.clk.Advance(time.Second)
	e.deadLetters("orders", 1)
	if rep, wait, _ = e.writer.Tick(ctxT(t)); rep.Calls != 0 || wait != time.Second {
		t.Fatalf("a second in: %+v, wait %v", rep, wait)
	}
	e.clk.Advance(time.Second)
	if rep, _, _ = e.writer.Tick(ctxT(t)); rep.Calls != 1 || rep.Done != 7 {
		t.Fatalf("after the linger: %+v, want one call for the 3 records and 3 events (and the "+
			"outage notice, which orders has no owner for)", rep)
	}
	// A full batch goes at once; the rest is not full and lingers.
	e.quietDeadLetters(600)
	rep, wait, _ = e.writer.Tick(ctxT(t))
	if rep.Calls != 1 || rep.Claimed != PerRound || wait != 0 {
		t.Fatalf("full batch: %+v, wait %v: want one call at once, and to look again at once", rep, wait)
	}
	if rep, wait, _ = e.writer.Tick(ctxT(t)); rep.Calls != 0 || wait == 0 {
		t.Fatalf("the rest, at once: %+v, wait %v: want it to linger", rep, wait)
	}
	e.clk.Advance(e.cfg.Salesforce.BatchLinger)
	if rep, _, _ = e.writer.Tick(ctxT(t)); rep.Calls != 1 || rep.Claimed != 200 {
		t.Fatalf("the rest after the linger: %+v", rep)
	}
}

// TestOneReplicaWritesABatch: while one replica holds the flush lease the
// others claim nothing, so replicas do not split batches.
func TestOneReplicaWritesABatch(t *testing.T) {
	e := newEnv(t)
	e.deadLetters("orders", 3)
	if ok, err := e.outbox.AcquireFlush(ctxT(t), "replica-2", config.DefaultFlushLease); err != nil || !ok {
		t.Fatal("replica-2 could not take the lease")
	}
	rep, err := e.writer.Round(ctxT(t))
	if err != nil || !rep.Busy || rep.Claimed != 0 || e.emu.APICalls() != 0 {
		t.Fatalf("round while another replica writes: %+v %v, %d calls", rep, err, e.emu.APICalls())
	}
	if err := e.outbox.ReleaseFlush(ctxT(t), "replica-2"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if e.emu.APICalls() != 1 {
		t.Errorf("%d calls, want 1", e.emu.APICalls())
	}
}

// TestFailedCallDefersTheBatchToOneTime: after a failed call every entry
// of the batch is due at one time — not each on its own jitter — and
// writes queued meanwhile wait for it too; then one call writes them all.
func TestFailedCallDefersTheBatchToOneTime(t *testing.T) {
	e := newEnv(t)
	e.writer.o.Rand = seq(0.1, 0.9, 0.5, 0.3) // jitter per draw: one draw per batch
	ids := e.quietDeadLetters(20)
	e.emu.Inject(sfemu.Fault{Kind: "composite", Status: 503, Body: sfemu.ServerError})
	e.round(t)
	due := map[time.Time]int{}
	for _, id := range ids {
		due[e.entry(policy.EntryName(policy.EntryMirror, id)).Due]++
		due[e.entry(policy.EntryName(policy.EntryResult, id)).Due]++
	}
	if len(due) != 1 {
		t.Fatalf("the failed batch is due at %d times, want one: %v", len(due), due)
	}
	var at time.Time
	for d := range due {
		at = d
	}
	more := e.quietDeadLetters(5)
	e.clk.Advance(at.Sub(e.clk.Now()) - time.Millisecond)
	if rep, _ := e.writer.Round(ctxT(t)); rep.Calls != 0 {
		t.Fatalf("a call before the deferral ended: %+v", rep)
	}
	e.clk.Advance(time.Millisecond)
	calls := e.emu.APICalls()
	e.drain()
	if got := e.emu.APICalls() - calls; got != 1 {
		t.Errorf("%d calls after the deferral, want 1 for the 25 dead letters", got)
	}
	for _, id := range append(ids, more...) {
		e.record(id)
	}
}

// quietDeadLetters makes n exhausted dead letters of orders whose last
// failure does not count toward the breaker (so any number can be made).
func (e *env) quietDeadLetters(n int) []string {
	e.t.Helper()
	return e.quietDeadLettersOf("orders", n)
}

// quietDeadLettersOf is quietDeadLetters for an endpoint.
func (e *env) quietDeadLettersOf(endpoint string, n int) []string {
	e.t.Helper()
	c := failed503(policy.ActionDeadLetter, policy.DeadLetterExhausted)
	c.CountsTowardBreaker = false
	return e.scheduled(endpoint, n, func(*policy.NewCallout) {}, c)
}

// seq returns the values in turn, then the last one.
func seq(vs ...float64) func() float64 {
	i := 0
	return func() float64 {
		v := vs[min(i, len(vs)-1)]
		i++
		return v
	}
}

// TestCompletionEventsPerEndpoint: completion_events all | dead_letters |
// none, and the default: all for a callout with a Callout-Source-Record,
// else dead letters only. A replay chain that succeeds still marks its
// record Reprocessed without an event.
func TestCompletionEventsPerEndpoint(t *testing.T) {
	e := newEnv(t, func(c *config.Config) {
		c.Endpoints["orders"].CompletionEvents = config.CompletionEventsNone
		c.Endpoints["payments"].CompletionEvents = config.CompletionEventsAll
		c.Endpoints["ledger"].CompletionEvents = config.CompletionEventsDeadLetters
	})
	noSource := func(nc *policy.NewCallout) { nc.SourceRecord = "" }
	dead := failed503(policy.ActionDeadLetter, policy.DeadLetterExhausted)
	published := map[string]bool{}
	for _, c := range []struct {
		endpoint string
		edit     func(*policy.NewCallout)
		comp     policy.Completion
		want     bool
	}{
		{"orders", func(*policy.NewCallout) {}, succeeded(), false},
		{"orders", func(*policy.NewCallout) {}, dead, false},
		{"payments", noSource, succeeded(), true},
		{"ledger", func(*policy.NewCallout) {}, succeeded(), false},
		{"ledger", func(*policy.NewCallout) {}, dead, true},
		{"unset", func(*policy.NewCallout) {}, succeeded(), true}, // default, with a source record
		{"unset", noSource, succeeded(), false},                   // default, without
		{"unset", noSource, dead, true},
	} {
		id := e.scheduled(c.endpoint, 1, c.edit, c.comp)[0]
		published[id] = c.want
	}
	e.drain()
	got := map[string]bool{}
	for _, ev := range e.emu.Events(CalloutResultEvent) {
		got[ev["Callout_Id__c"].(string)] = true
	}
	for id, want := range published {
		if got[id] != want {
			t.Errorf("callout %s: event published %v, want %v", id, got[id], want)
		}
	}
	if n := e.outboxLen(); n != 0 {
		t.Errorf("%d entries left", n)
	}
	// A successful replay chain without an event still marks Reprocessed.
	root := e.scheduled("orders", 1, func(*policy.NewCallout) {}, dead)[0]
	e.drain()
	e.clk.Advance(time.Minute)
	e.scheduled("orders", 1, replayOf(root), succeeded())
	e.drain()
	if s := e.record(root)["Status__c"]; s != policy.RecordReprocessed {
		t.Errorf("status = %v, want Reprocessed", s)
	}
}

// costScenario is a run of dead letters against the emulator, stepped on
// the injected clock as Run steps in real time: arrivals(s) dead letters
// are made at second s, Salesforce answers 503 to everything while down(s),
// and the writer's Tick is called when a dead letter was made (as Wake
// does) and whenever its wait has passed.
type costScenario struct {
	seconds  int
	arrivals func(s int) int
	down     func(s int) bool
}

// costResult is what a scenario cost.
type costResult struct {
	deadLetters int
	calls       int64 // API calls (failed ones included)
	tokens      int
	took        time.Duration // simulated time until the outbox was empty
}

func (r costResult) perDeadLetter() float64 { return float64(r.calls) / float64(r.deadLetters) }

// run drives the scenario, then goes on (Salesforce up) until the outbox
// is empty, at most two simulated hours.
func (e *env) run(sc costScenario) costResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := e.clk.Now()
	var res costResult
	next := start
	isDown := false
	const step = 100 * time.Millisecond
	for i := 0; ; i++ {
		now := e.clk.Now()
		s := int(now.Sub(start) / time.Second)
		woken := false
		if now.Sub(start)%time.Second == 0 && s < sc.seconds {
			if d := sc.down != nil && sc.down(s); d != isDown {
				isDown = d
				e.emu.ClearFaults()
				if d {
					e.emu.Inject(sfemu.Fault{Status: http.StatusServiceUnavailable, Body: sfemu.ServerError, Times: 1 << 30})
				}
			}
			if n := sc.arrivals(s); n > 0 {
				if res.deadLetters == 0 { // the first opens an outage: its owner is told (an action call)
					e.deadLetters("payments", 1)
					n--
					res.deadLetters++
				}
				e.quietDeadLettersOf("payments", n)
				res.deadLetters += n
				woken = true
			}
		}
		if woken || !now.Before(next) {
			for {
				_, wait, err := e.writer.Tick(ctx)
				if err != nil {
					e.t.Fatal(err)
				}
				if wait > 0 {
					next = e.clk.Now().Add(wait)
					break
				}
			}
		}
		if s >= sc.seconds && !isDown && e.outboxLen() == 0 {
			break
		}
		if now.Sub(start) > 2*time.Hour+time.Duration(sc.seconds)*time.Second {
			e.t.Fatalf("the outbox never emptied (%d entries left)", e.outboxLen())
		}
		if isDown && s >= sc.seconds {
			isDown = false
			e.emu.ClearFaults()
		}
		e.clk.Advance(step)
	}
	res.calls, res.tokens, res.took = e.emu.APICalls(), e.emu.Calls("token"), e.clk.Now().Sub(start)
	return res
}

// The API-cost scenarios of BENCHMARKS.md, each with its
// target in calls per dead letter.
func burst(n int) costScenario {
	return costScenario{seconds: 1, arrivals: func(s int) int { return n }}
}

func isolated(n int) costScenario {
	return costScenario{seconds: n, arrivals: func(int) int { return 1 }}
}

// outage: a first dead letter while Salesforce is up (it is written, so a
// token exists), then rate dead letters a second for the outage's length
// while Salesforce answers 503 to everything, from the fourth second.
func outage(length time.Duration, rate int) costScenario {
	secs := int(length / time.Second)
	return costScenario{seconds: secs + 4,
		arrivals: func(s int) int {
			switch {
			case s == 0:
				return 1
			case s >= 4 && s < secs+4:
				return rate
			}
			return 0
		},
		down: func(s int) bool { return s >= 4 && s < secs+4 }}
}

// TestAPICost runs the scenarios at sizes that keep the test quick and
// checks their targets (BENCHMARKS.md has the full sizes, from
// BenchmarkAPICost): a burst of 1,000 — at most 1 call per 200 dead letters
// —, 50 isolated dead letters a second apart — at most 1 each —, and a
// one-minute outage at 20 a second — at most 0.01 each.
func TestAPICost(t *testing.T) {
	for _, c := range []struct {
		name   string
		sc     costScenario
		target float64
	}{
		{"burst of 1000", burst(1000), 0.005},
		{"50 isolated", isolated(50), 1},
		{"1-minute outage at 20/s", outage(time.Minute, 20), 0.01},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Each scenario has its own store, emulator and injected
			// clock: they run beside each other (the go test step's
			// last package, these take most of its tail under -race).
			t.Parallel()
			e := newEnv(t)
			r := e.run(c.sc)
			t.Logf("%s: %d dead letters, %d API calls (%.4f each), %d token requests, outbox empty after %v",
				c.name, r.deadLetters, r.calls, r.perDeadLetter(), r.tokens, r.took)
			if r.perDeadLetter() > c.target {
				t.Errorf("%.4f calls per dead letter, target %.4f", r.perDeadLetter(), c.target)
			}
			if got := len(e.emu.Records(FailedCalloutObject)); got != r.deadLetters {
				t.Errorf("%d records for %d dead letters", got, r.deadLetters)
			}
		})
	}
}

// BenchmarkAPICost measures the API calls per dead letter of BENCHMARKS.md
// at full size: a burst of 10,000; 50 isolated dead letters a second
// apart; a 5-minute outage at 10 and at 1 dead letters a second. One run
// per scenario (the figure does not vary with b.N: the clock is
// injected); run with -benchtime=1x.
func BenchmarkAPICost(b *testing.B) {
	for _, c := range []struct {
		name string
		sc   costScenario
	}{
		{"burst-10000", burst(10000)},
		{"isolated-50", isolated(50)},
		{"outage-5m-10ps", outage(5*time.Minute, 10)},
		{"outage-5m-1ps", outage(5*time.Minute, 1)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var r costResult
			for range b.N {
				e := newEnv(b)
				r = e.run(c.sc)
			}
			b.ReportMetric(r.perDeadLetter(), "calls/deadletter")
			b.ReportMetric(float64(r.calls), "calls")
			b.ReportMetric(float64(r.deadLetters), "deadletters")
			b.Logf("%s: %d dead letters, %d API calls (%.4f each), %d token requests, outbox empty after %v",
				c.name, r.deadLetters, r.calls, r.perDeadLetter(), r.tokens, r.took)
		})
	}
}
