package stats

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// t0 is a whole hour: 12:00:00 UTC.
var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// ctxT is a test's context (storetest.Ctx).
func ctxT(t *testing.T) context.Context { return storetest.Ctx(t) }

// mustSeries reads endpoint's series over the range named rng (RangeOf)
// from r and fails the test on an error.
func mustSeries(t *testing.T, r *Recorder, endpoint, rng string) Series {
	t.Helper()
	within, ok := RangeOf(rng)
	if !ok {
		t.Fatalf("no range %q", rng)
	}
	s, err := r.Series(ctxT(t), endpoint, within)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReplicasAddIntoOneSeries: two replicas count into the same minute
// buckets; a reader sums them per point, by class, with dead letters and
// latency percentiles; the keys carry their retention.
func TestReplicasAddIntoOneSeries(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		ctx, clk := ctxT(t), clocktest.New(t0.Add(10*time.Second))
		a, c := New(b.Client, Options{Now: clk.Now}), New(b.Client, Options{Now: clk.Now})
		for range 3 {
			a.Attempt("pay", policy.Retryable, 40*time.Millisecond) // bucket ≤50
		}
		c.Attempt("pay", policy.Success, 3*time.Millisecond) // bucket ≤5
		c.Attempt("pay", policy.Rejected, time.Second)       // not an attempt: ignored
		c.DeadLetter("pay", 1)
		clk.Advance(time.Minute)                           // 12:01
		a.Attempt("pay", policy.Permanent, 40*time.Second) // slower than every bound
		a.Attempt("crm", policy.Success, time.Millisecond)
		for _, r := range []*Recorder{a, c} {
			if err := r.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s := mustSeries(t, a, "pay", "1h")
		if len(s.Points) != 60 {
			t.Fatalf("points = %d, want 60", len(s.Points))
		}
		p0, p1 := s.Points[58], s.Points[59]
		if !p0.Start.Equal(t0) || !p1.Start.Equal(t0.Add(time.Minute)) {
			t.Fatalf("last two points start %v, %v; want 12:00 and 12:01", p0.Start, p1.Start)
		}
		if p0.Success != 1 || p0.Retryable != 3 || p0.Permanent != 0 || p0.DeadLetters != 1 {
			t.Fatalf("12:00 = %+v, want 1 success, 3 retryable, 1 dead letter", p0)
		}
		if l := p0.Latency; l.Count != 4 || l.P50Ms != 50 || l.P99Ms != 50 || l.MeanMs != (3*40+3)/4 {
			t.Fatalf("12:00 latency = %+v, want 4 attempts, p50 = p99 = 50 ms, mean 30 ms", l)
		}
		if p1.Permanent != 1 || p1.Latency.P95Ms != LatencyBounds[len(LatencyBounds)-1] {
			t.Fatalf("12:01 = %+v, want 1 permanent at the last bound", p1)
		}
		if s.Total.Attempts() != 5 || s.Total.DeadLetters != 1 {
			t.Fatalf("total = %+v, want 5 attempts and 1 dead letter", s.Total)
		}
		// The hour bucket holds both minutes; 7d reads it.
		w := mustSeries(t, a, "pay", "7d")
		if last := w.Points[len(w.Points)-1]; last.Attempts() != 5 || len(w.Points) != 84 {
			t.Fatalf("7d: %d points, last %+v; want 84 and 5 attempts", len(w.Points), last)
		}
		ttl := b.Client.TTL(ctx, keyspace.StatsMinute("pay", t0.Unix()/60)).Val()
		if ttl <= 24*time.Hour || ttl > MinuteRetention {
			t.Fatalf("minute bucket TTL = %v, want (24h, %v]", ttl, MinuteRetention)
		}
		if ttl := b.Client.TTL(ctx, keyspace.StatsHour("pay", t0.Unix()/3600)).Val(); ttl <= 7*24*time.Hour {
			t.Fatalf("hour bucket TTL = %v, want over 7 days", ttl)
		}
		other := mustSeries(t, a, "crm", "1h")
		if other.Total.Success != 1 || other.Total.Retryable != 0 {
			t.Fatalf("crm total = %+v, want its own 1 success", other.Total)
		}
	})
}

// TestFlushKeepsCountsWhenRedisFails: a write Redis refuses keeps what was
// counted, and the next write carries it.
func TestFlushKeepsCountsWhenRedisFails(t *testing.T) {
	b := redistest.Backends(t)[0] // miniredis: it can be made to fail
	if b.Mini == nil {
		t.Skip("needs miniredis")
	}
	ctx, clk := ctxT(t), clocktest.New(t0)
	var logs bytes.Buffer
	r := New(b.Client, Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r.Attempt("pay", policy.Success, time.Millisecond)
	b.Mini.SetError("LOADING")
	for range 3 {
		if err := r.Flush(ctx); err == nil || !errors.As(err, new(*writeError)) {
			t.Fatalf("Flush on a failing Redis = %v, want a writeError", err)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for one outage, want 1:\n%s", n, logs.String())
	}
	b.Mini.SetError("")
	r.Attempt("pay", policy.Success, time.Millisecond)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := mustSeries(t, r, "pay", "1h"); s.Total.Success != 2 {
		t.Fatalf("success = %d after failed and good flushes, want 2", s.Total.Success)
	}
	if !strings.Contains(logs.String(), "works again") {
		t.Fatalf("no line of the recovery:\n%s", logs.String())
	}
}

// TestPercentile: the rank rounds up and lands on its bucket's bound.
func TestPercentile(t *testing.T) {
	var c counts
	c.lat[0], c.lat[4] = 94, 6 // 94 attempts ≤5 ms, 6 in (50, 100] ms
	p := c.point(t0)
	if p.Latency.P50Ms != 5 || p.Latency.P95Ms != 100 || p.Latency.P99Ms != 100 {
		t.Fatalf("latency = %+v, want p50 5, p95 100, p99 100", p.Latency)
	}
	if z := (&counts{}).point(t0); z.Latency != (Latency{}) {
		t.Fatalf("no attempts: latency = %+v, want zero", z.Latency)
	}
}

// TestRunWritesOnItsWayOut: a Recorder whose context ends writes what it
// counted before Run returns, without waiting for its interval.
func TestRunWritesOnItsWayOut(t *testing.T) {
	b := redistest.Backends(t)[0]
	clk := clocktest.New(t0)
	r := New(b.Client, Options{Now: clk.Now, FlushEvery: time.Hour})
	r.Attempt("pay", policy.Permanent, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Run(ctx)
	if s := mustSeries(t, r, "pay", "1h"); s.Total.Permanent != 1 {
		t.Fatalf("after Run: %+v; want the permanent attempt written", s.Total)
	}
}
