package stats

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Range is a chart's time range: Span back from now in points of Step,
// read from minute buckets or, for Hourly, hour buckets.
type Range struct {
	Name   string
	Span   time.Duration
	Step   time.Duration
	Hourly bool
}

// Ranges are the ranges a chart offers, shortest first: 1h in minutes, 6h
// in 5-minute points, 24h in 20-minute points (all from minute buckets),
// 7d in 2-hour points (from hour buckets).
var Ranges = []Range{
	{Name: "1h", Span: time.Hour, Step: time.Minute},
	{Name: "6h", Span: 6 * time.Hour, Step: 5 * time.Minute},
	{Name: "24h", Span: 24 * time.Hour, Step: 20 * time.Minute},
	{Name: "7d", Span: 7 * 24 * time.Hour, Step: 2 * time.Hour, Hourly: true},
}

// RangeOf returns the range called name, false when there is none.
func RangeOf(name string) (Range, bool) {
	for _, r := range Ranges {
		if r.Name == name {
			return r, true
		}
	}
	return Range{}, false
}

// Point is one step of a series: what every replica counted from Start
// for the range's Step.
type Point struct {
	Start time.Time
	// Attempts sent, by outcome class (contract §2).
	Success, Retryable, Permanent int64
	// DeadLetters made (contract §7).
	DeadLetters int64
	// Latency of those attempts.
	Latency Latency
}

// Attempts is the point's attempts of every class.
func (p Point) Attempts() int64 { return p.Success + p.Retryable + p.Permanent }

// Latency summarises a latency histogram, in milliseconds. A percentile is
// the upper bound of the LatencyBounds bucket it falls in (the last
// bucket, slower than every bound, reads as the last bound); 0 with no
// attempts.
type Latency struct {
	Count, MeanMs, P50Ms, P95Ms, P99Ms int64
}

// Series is one endpoint's points over a range, oldest first; the last
// point holds the current minute (what replicas counted but have not yet
// written, at most FlushEvery old, is missing from it).
type Series struct {
	Endpoint string
	Range    Range
	Points   []Point
	// Total sums every point (its Latency over all of them).
	Total Point
}

// Series reads endpoint's figures over rng ending now (the Recorder's
// clock): one pipelined HGETALL per minute (or hour) bucket, 60 to 1440
// keys, summed over the replicas that wrote them. Errors: Redis's, wrapped.
func (r *Recorder) Series(ctx context.Context, endpoint string, rng Range) (Series, error) {
	unit := time.Minute
	if rng.Hourly {
		unit = time.Hour
	}
	step := int64(rng.Step / unit)
	n := int64(rng.Span / rng.Step)
	// The last point ends with the current unit; points are aligned to
	// whole steps of the Unix epoch, so a refresh keeps its buckets.
	last := r.o.Now().Unix() / int64(unit/time.Second)
	first := (last/step - n + 1) * step
	cmds := make([]*redis.MapStringStringCmd, 0, n*step)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for u := first; u <= last; u++ {
			key := keyspace.StatsMinute(endpoint, u)
			if rng.Hourly {
				key = keyspace.StatsHour(endpoint, u)
			}
			cmds = append(cmds, p.HGetAll(ctx, key))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return Series{}, fmt.Errorf("stats: series of %s: %w", endpoint, err)
	}
	s := Series{Endpoint: endpoint, Range: rng, Points: make([]Point, n)}
	hists := make([]counts, n)
	var total counts
	for i, cmd := range cmds {
		c := parse(cmd.Val())
		hists[int64(i)/step].add(&c)
		total.add(&c)
	}
	for i := range s.Points {
		s.Points[i] = hists[i].point(time.Unix((first+int64(i)*step)*int64(unit/time.Second), 0).UTC())
	}
	s.Total = total.point(s.Points[0].Start)
	return s, nil
}

// parse reads a bucket's hash.
func parse(m map[string]string) counts {
	var c counts
	num := func(f string) int64 { n, _ := strconv.ParseInt(m[f], 10, 64); return n }
	c.success, c.retryable, c.permanent = num(fSuccess), num(fRetryable), num(fPermanent)
	c.dead, c.latSum = num(fDead), num(fLatSum)
	for i := range c.lat {
		c.lat[i] = num(fLatPrefix + strconv.Itoa(i))
	}
	return c
}

// point is c as a Point starting at start.
func (c *counts) point(start time.Time) Point {
	p := Point{Start: start, Success: c.success, Retryable: c.retryable, Permanent: c.permanent, DeadLetters: c.dead}
	var n int64
	for _, v := range c.lat {
		n += v
	}
	if n == 0 {
		return p
	}
	p.Latency = Latency{Count: n, MeanMs: c.latSum / n, P50Ms: c.percentile(n, 50), P95Ms: c.percentile(n, 95),
		P99Ms: c.percentile(n, 99)}
	return p
}

// percentile is the upper bound of the bucket holding the q-th per cent
// of the n attempts.
func (c *counts) percentile(n int64, q int64) int64 {
	rank := (n*q + 99) / 100 // the ceil(n·q/100)-th attempt, 1-based
	var seen int64
	for i, v := range c.lat {
		seen += v
		if seen >= rank {
			return LatencyBounds[min(i, len(LatencyBounds)-1)]
		}
	}
	return LatencyBounds[len(LatencyBounds)-1]
}
