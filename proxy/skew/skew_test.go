package skew

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// fakeRedis answers TIME with a fixed instant and advances the local clock
// by the round trip while it "waits".
type fakeRedis struct {
	at  time.Time
	rtt time.Duration
	clk *clocktest.Clock
	err error
}

func (f *fakeRedis) Time(ctx context.Context) *redis.TimeCmd {
	cmd := redis.NewTimeCmd(ctx)
	f.clk.Advance(f.rtt)
	if f.err != nil {
		cmd.SetErr(f.err)
		return cmd
	}
	cmd.SetVal(f.at)
	return cmd
}

type gauge struct {
	v   float64
	set int
}

func (g *gauge) Set(v float64) { g.v, g.set = v, g.set+1 }

func TestMeasureUsesTheRoundTripsMidpoint(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, tt := range []struct {
		name  string
		local time.Duration // local clock minus Redis's, at the midpoint
		rtt   time.Duration
	}{
		{"in step", 0, 2 * time.Millisecond},
		{"ahead 90 s", 90 * time.Second, 4 * time.Millisecond},
		{"behind 90 s", -90 * time.Second, 10 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The local clock reads t0+local at the midpoint: start half a
			// round trip before it.
			clk := clocktest.New(t0.Add(tt.local - tt.rtt/2))
			f := &fakeRedis{at: t0, rtt: tt.rtt, clk: clk}
			off, rtt, err := Measure(context.Background(), f, clk.Now)
			if err != nil || off != tt.local || rtt != tt.rtt {
				t.Fatalf("Measure = %v, %v, %v; want %v, %v", off, rtt, err, tt.local, tt.rtt)
			}
		})
	}
}

func TestCheckSetsTheGaugeAndWarnsPastTheThreshold(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	for _, tt := range []struct {
		name string
		off  time.Duration
		warn bool
	}{
		{"500 ms ahead: no warning", 500 * time.Millisecond, false},
		{"exactly 1 s: no warning", time.Second, false},
		{"1.5 s behind: warning", -1500 * time.Millisecond, true},
		{"90 s ahead: warning", 90 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			clk := clocktest.New(t0.Add(tt.off))
			g := &gauge{}
			m := &Monitor{Client: &fakeRedis{at: t0, clk: clk}, Now: clk.Now, Gauge: g, Logger: log}
			off, err := m.Check(context.Background())
			if err != nil || off != tt.off || g.v != tt.off.Seconds() || g.set != 1 {
				t.Fatalf("Check = %v, %v; gauge %v (%d sets); want %v", off, err, g.v, g.set, tt.off)
			}
			if got := strings.Contains(logs.String(), "clock is off"); got != tt.warn {
				t.Fatalf("warned = %v, want %v; log %q", got, tt.warn, logs.String())
			}
		})
	}
}

func TestCorrectedReadsRedisClock(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktest.New(t0.Add(90 * time.Second)) // 90 s ahead of Redis
	f := &fakeRedis{at: t0, clk: clk}
	m := &Monitor{Client: f, Now: clk.Now, Gauge: &gauge{}, Logger: slog.New(slog.DiscardHandler)}
	if got := m.Corrected(); !got.Equal(clk.Now()) {
		t.Fatalf("before any measurement Corrected = %v, want the local clock %v", got, clk.Now())
	}
	if _, err := m.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if got, want := m.Corrected(), t0.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("Corrected = %v, want Redis's clock %v", got, want)
	}
	// A failed measurement keeps the last offset; an offset within the
	// noise (below CorrectPast) is not corrected.
	f.err = errors.New("connection refused")
	_, _ = m.Check(context.Background())
	if got, want := m.Corrected(), t0.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("after a failed check Corrected = %v, want %v", got, want)
	}
	f.err, f.at = nil, clk.Now().Add(-CorrectPast) // exactly CorrectPast ahead
	if _, err := m.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := m.Corrected(); !got.Equal(clk.Now()) {
		t.Fatalf("an offset of %v was corrected: Corrected = %v, want the local clock %v", CorrectPast, got, clk.Now())
	}
}

// A steady offset logs the same line every time (whole seconds, no round
// trip), so the logger's Collapser folds the repeats.
func TestSteadyOffsetLogsIdenticalLines(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	var lines []string
	for _, off := range []time.Duration{90*time.Second + time.Millisecond, 90*time.Second + 200*time.Millisecond} {
		logs.Reset()
		clk := clocktest.New(t0.Add(off))
		m := &Monitor{Client: &fakeRedis{at: t0, rtt: off / 10000, clk: clk}, Now: clk.Now, Gauge: &gauge{}, Logger: log}
		if _, err := m.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, logs.String())
	}
	if lines[0] == "" || lines[0] != lines[1] {
		t.Fatalf("warnings for a steady 90 s offset differ:\n%s%s", lines[0], lines[1])
	}
}

func TestCheckKeepsTheGaugeWhenRedisFails(t *testing.T) {
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	g := &gauge{v: 0.25}
	m := &Monitor{Client: &fakeRedis{clk: clk, err: errors.New("connection refused")}, Now: clk.Now, Gauge: g,
		Logger: slog.New(slog.DiscardHandler)}
	if _, err := m.Check(context.Background()); err == nil {
		t.Fatal("no error")
	}
	if g.set != 0 || g.v != 0.25 {
		t.Fatalf("gauge changed to %v", g.v)
	}
}

// On real servers (and miniredis, whose TIME is the host's clock unless
// set) an unskewed host measures an offset within its round trip, and a
// clock set 90 s ahead measures 90 s.
func TestMeasureOnRedis(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		for _, skew := range []time.Duration{0, 90 * time.Second} {
			now := func() time.Time { return time.Now().Add(skew) }
			off, rtt, err := Measure(context.Background(), b.Client, now)
			if err != nil {
				t.Fatal(err)
			}
			// TIME has microsecond resolution; allow the round trip.
			if d := off - skew; d > rtt+time.Millisecond || d < -rtt-time.Millisecond {
				t.Fatalf("skew %v: offset %v (round trip %v)", skew, off, rtt)
			}
		}
	})
}
