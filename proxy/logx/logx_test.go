package logx

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestCollapseRepeatedErrors: a thousand identical "claim failed" errors
// (Redis down) within a minute are one line, then one line with the count
// once the minute is over; a different endpoint's, and info lines, are
// their own; after the flush the next error is written again.
func TestCollapseRepeatedErrors(t *testing.T) {
	var buf proctest.LogBuffer
	clk := clocktest.New(time.UnixMilli(1_700_000_000_000))
	log, c := New(&buf, Options{CollapseInterval: time.Minute, Now: clk.Now})
	down := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	for range 1000 {
		log.Warn("claim failed", slog.String("endpoint", "pay-api"), slog.Any("error", down))
		clk.Advance(50 * time.Millisecond)
	}
	log.With(slog.String("endpoint", "crm-api")).Warn("claim failed", slog.Any("error", down))
	log.Info("attempt", slog.String("endpoint", "pay-api"))
	log.Info("attempt", slog.String("endpoint", "pay-api"))
	got := buf.Lines(t)
	if len(got) != 4 || got[0]["endpoint"] != "pay-api" || got[1]["endpoint"] != "crm-api" || got[2]["msg"] != "attempt" {
		t.Fatalf("before the flush: %v", got)
	}
	clk.Advance(time.Minute)
	c.Flush(context.Background(), false)
	got = buf.Lines(t)
	// 1000 in 50 s: the first written, 999 counted.
	if len(got) != 5 || got[4]["msg"] != "claim failed" || got[4]["repeated"] != float64(999) ||
		got[4]["repeated_within"] != "1m0s" || got[4]["endpoint"] != "pay-api" || got[4]["error"] != down.Error() {
		t.Fatalf("the summary: %v", got[len(got)-1])
	}
	log.Warn("claim failed", slog.String("endpoint", "pay-api"), slog.Any("error", down))
	if got = buf.Lines(t); len(got) != 6 || got[5]["repeated"] != nil {
		t.Fatalf("after the flush the error is written again: %v", got[len(got)-1])
	}
}

// TestCollapseSummaryBeforeTheNextLine: when the next identical error
// comes after the interval (before any flush), the count of the last one
// is written first; the final flush writes what is left.
func TestCollapseSummaryBeforeTheNextLine(t *testing.T) {
	var buf proctest.LogBuffer
	clk := clocktest.New(time.UnixMilli(1_700_000_000_000))
	log, c := New(&buf, Options{CollapseInterval: time.Minute, Now: clk.Now})
	for range 3 {
		log.Error("completion failed", slog.String("callout_id", "x"))
	}
	clk.Advance(61 * time.Second)
	log.Error("completion failed", slog.String("callout_id", "x"))
	log.Error("completion failed", slog.String("callout_id", "x"))
	got := buf.Lines(t)
	if len(got) != 3 || got[1]["repeated"] != float64(2) || got[2]["repeated"] != nil {
		t.Fatalf("lines: %v", got)
	}
	c.Flush(context.Background(), true)
	if got = buf.Lines(t); len(got) != 4 || got[3]["repeated"] != float64(1) {
		t.Fatalf("final flush: %v", got)
	}
}

// TestCollapseBound: past maxTracked distinct lines in one interval, new
// ones are written as they come, none lost.
func TestCollapseBound(t *testing.T) {
	var buf proctest.LogBuffer
	clk := clocktest.New(time.UnixMilli(1_700_000_000_000))
	log, _ := New(&buf, Options{CollapseInterval: time.Minute, Now: clk.Now})
	for i := range maxTracked + 50 {
		log.Warn("lease expired", slog.Int("n", i))
	}
	if n := len(buf.Lines(t)); n != maxTracked+50 {
		t.Fatalf("%d lines, want %d", n, maxTracked+50)
	}
}

// TestFormatsLevelsAndDurations: text or JSON, the level honoured, and a
// duration written as "20s", not nanoseconds.
func TestFormatsLevelsAndDurations(t *testing.T) {
	var buf proctest.LogBuffer
	log, c := New(&buf, Options{Level: slog.LevelWarn})
	if c != nil {
		t.Fatal("a Collapser without an interval")
	}
	log.Info("hidden")
	log.Warn("draining", slog.Duration("grace", 20*time.Second))
	got := buf.Lines(t)
	if len(got) != 1 || got[0]["grace"] != "20s" {
		t.Fatalf("json: %v", got)
	}
	buf.Reset()
	log, _ = New(&buf, Options{Format: "text"})
	log.Info("draining", slog.Duration("grace", 1500*time.Millisecond))
	if s := buf.String(); !strings.Contains(s, "level=INFO msg=draining grace=1.5s") {
		t.Fatalf("text: %q", s)
	}
}

// TestRedisLogger: a go-redis line becomes a JSON warning with component
// go-redis.
func TestRedisLogger(t *testing.T) {
	var buf proctest.LogBuffer
	log, _ := New(&buf, Options{})
	RedisLogger{Logger: log}.Printf(context.Background(), "redis: %s: connection pool timeout", "127.0.0.1:6379")
	got := buf.Lines(t)
	if len(got) != 1 || got[0]["level"] != "WARN" || got[0]["component"] != "go-redis" ||
		got[0]["msg"] != "redis: 127.0.0.1:6379: connection pool timeout" {
		t.Fatalf("lines: %v", got)
	}
}
