package proxy

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestRejectionLogIsSampled: 1,000 identical rejections in a minute are
// one log record with the detail, then one record with their count when
// the minute ends; another code or endpoint is logged on its
// own; a key quiet for a minute is forgotten; the count of an unfinished
// window is written on shutdown.
func TestRejectionLogIsSampled(t *testing.T) {
	var buf proctest.LogBuffer
	var mu sync.Mutex
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	l := newRejectionLog(slog.New(slog.NewJSONHandler(&buf, nil)), clock)
	ctx := context.Background()
	reject := func(endpoint, code, detail string) {
		l.log(ctx, slog.LevelInfo, rejectionKey{endpoint, code},
			[]slog.Attr{slog.String("endpoint", endpoint), slog.String("code", code), slog.String("detail", detail)})
	}
	for i := range 1000 {
		reject("", "unauthorized", "token expired #"+string(rune('a'+i%26)))
		advance(50 * time.Millisecond) // 50 s in all
	}
	reject("pay", "body-too-large", "too large")
	if recs := buf.Lines(t); len(recs) != 2 || recs[0]["detail"] != "token expired #a" ||
		recs[1]["code"] != "body-too-large" {
		t.Fatalf("records during the flood = %v; want the first of each key only", recs)
	}
	l.flush(ctx) // 50 s: no window has ended
	if n := len(buf.Lines(t)); n != 2 {
		t.Fatalf("%d records after an early flush, want 2", n)
	}
	advance(10 * time.Second)
	l.flush(ctx)
	recs := buf.Lines(t)
	if len(recs) != 3 || recs[2]["msg"] != "rejected (repeated)" || recs[2]["count"] != float64(999) ||
		recs[2]["code"] != "unauthorized" {
		t.Fatalf("records after the minute = %v; want one summary counting 999", recs)
	}
	// The body-too-large key was alone in its window: forgotten, and its
	// next rejection, a minute later, is logged in full again.
	advance(time.Minute)
	l.flush(ctx)
	reject("pay", "body-too-large", "too large again")
	reject("pay", "body-too-large", "too large again")
	recs = buf.Lines(t)
	if len(recs) != 4 || recs[3]["detail"] != "too large again" {
		t.Fatalf("records = %v; want the new rejection logged once", recs[3:])
	}
	l.flushAll(ctx)
	recs = buf.Lines(t)
	if len(recs) != 5 || recs[4]["count"] != float64(1) {
		t.Fatalf("records after flushAll = %v; want the pending count", recs[4:])
	}
	// The window it covers is the time since the window began (no time has
	// passed here), never the time since the zero time.
	if w, _ := recs[4]["window"].(float64); w < 0 || w >= float64(time.Minute) {
		t.Errorf("flushAll's window = %v ns, want the part of the window that passed", recs[4]["window"])
	}
}
