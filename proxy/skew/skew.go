// Package skew measures how far this replica's wall clock is from Redis's.
//
// Redis's clock (TIME, read inside the scripts) is the one clock of shared
// state: due times, leases, probe tokens, pauses and retentions (contract
// §1). A replica's own clock still stamps its log lines and checks callers'
// token exp/nbf (contract §9), so an operator needs to see when it drifts:
// Monitor exports the difference as callout_clock_offset_seconds and logs a
// warning past a threshold (docs/operating.md, "Clocks").
package skew

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timer is the one Redis command skew needs: TIME (redis.Cmdable has it;
// on a Cluster client it goes to one node, whose clock NTP keeps with the
// others').
type Timer interface {
	Time(ctx context.Context) *redis.TimeCmd
}

// Measure asks Redis for its time once and returns this clock's offset from
// it: positive when now is ahead of Redis. The local instant compared is the
// midpoint of the round trip, so the error is at most rtt/2 (both are
// returned). Errors: Redis's.
func Measure(ctx context.Context, c Timer, now func() time.Time) (offset, rtt time.Duration, err error) {
	sent := now()
	rt, err := c.Time(ctx).Result()
	if err != nil {
		return 0, 0, err
	}
	got := now()
	rtt = got.Sub(sent)
	mid := sent.Add(rtt / 2)
	return mid.Sub(rt), rtt, nil
}

// Gauge is where Monitor puts the offset, in seconds (a prometheus.Gauge).
type Gauge interface{ Set(float64) }

// Monitor compares this replica's clock with Redis's every Every and
// reports the offset. The zero value is not usable: Client, Gauge and
// Logger must be set.
type Monitor struct {
	// Client is the store's Redis client.
	Client Timer
	// Now is this replica's clock. Default time.Now.
	Now func() time.Time
	// Every is the time between measurements. Default 30 s.
	Every time.Duration
	// Warn is the offset (either sign) past which a measurement logs a
	// warning (collapsed by the logger's Collapser when it repeats).
	// Default 1 s.
	Warn time.Duration
	// Gauge receives the offset in seconds (callout_clock_offset_seconds).
	Gauge Gauge
	// Logger receives the warnings.
	Logger *slog.Logger

	// offset is the last measured offset in ns (0 until the first).
	offset atomic.Int64
}

// CorrectPast is the smallest offset Corrected corrects (and at least the
// measurement's round trip): NTP keeps healthy hosts within a few ms, and a
// measurement on a loaded 2-core host can be off by more than that, so
// smaller offsets are left alone (the gauge still shows them).
const CorrectPast = 100 * time.Millisecond

// Corrected is this replica's best reading of Redis's clock: Now minus the
// last measured offset when it is past CorrectPast (Now itself until the
// first measurement, and while the offset is smaller). It is the
// clock the composition root gives every component that computes with
// shared state — the store, the dispatcher, the attempt runner, the replay
// runner — so the durations they pass to Redis and the instants they read
// back (due times, lease and probe times) agree with the scripts, which read
// TIME (contract §1, ARCHITECTURE.md "One clock"). The error is at most the
// measurement's rtt/2 plus the drift since it (Every, 30 s by default); the
// scripts decide every instant anyway, so the error only makes a replica
// look at a due callout a little early or late. Safe for concurrent use.
func (m *Monitor) Corrected() time.Time {
	now := m.Now
	if now == nil {
		now = time.Now
	}
	return now().Add(-time.Duration(m.offset.Load()))
}

// Check measures once, sets the gauge and logs a warning when the offset is
// past Warn. It returns the offset; a failed measurement changes nothing
// (the gauge keeps its last value) and returns Redis's error.
func (m *Monitor) Check(ctx context.Context) (time.Duration, error) {
	now := m.Now
	if now == nil {
		now = time.Now
	}
	warn := m.Warn
	if warn <= 0 {
		warn = time.Second
	}
	off, rtt, err := Measure(ctx, m.Client, now)
	if err != nil {
		return 0, err
	}
	// An offset within the measurement's own noise (the round trip, which a
	// loaded host stretches unevenly, or CorrectPast) is not corrected:
	// applying noise would only move this replica's clock off Redis's.
	if off > max(rtt, CorrectPast) || off < -max(rtt, CorrectPast) {
		m.offset.Store(int64(off))
	} else {
		m.offset.Store(0)
	}
	m.Gauge.Set(off.Seconds())
	if off > warn || off < -warn {
		// Whole seconds and no round trip: a steady offset logs identical
		// lines, which the logger's Collapser folds into one per interval
		// (the gauge has the exact value).
		m.Logger.Warn("this replica's clock is off Redis's clock",
			"offset_seconds", math.Round(off.Seconds()), "warn_past", warn)
	}
	return off, nil
}

// Run calls Check at once and then every Every until ctx ends. Failed
// measurements are not logged here: a Redis outage is reported where the
// store meets it.
func (m *Monitor) Run(ctx context.Context) {
	every := m.Every
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_, _ = m.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
