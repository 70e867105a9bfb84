// Package stats keeps the per-endpoint figures the ops console charts
// (docs/console.md "Charts"): attempts by outcome class (contract §2), dead
// letters (contract §7) and attempt latency, per minute, in the proxy's own
// Redis — no Prometheus needed.
//
// Each replica counts in memory (Recorder.Attempt and Recorder.DeadLetter
// take a mutex and bump integers: nothing on the hot path touches Redis)
// and Recorder.Run writes what it counted every few seconds in one
// pipelined write: HINCRBY into a minute bucket and an hour bucket per
// endpoint (keyspace.StatsMinute, keyspace.StatsHour), each with its TTL.
// Buckets are keyed by the shared clock's minute, so every replica adds
// into the same ones; a reader (Reader.Series) sums what all replicas
// wrote. It works unchanged on the embedded store (miniredis) and on Redis
// Cluster (the keys of one endpoint share its hash tag).
package stats

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Retention of the buckets (their TTL, set on every write).
const (
	// MinuteRetention is how long a minute bucket is kept: the 24 h range
	// and an hour's margin.
	MinuteRetention = 25 * time.Hour
	// HourRetention is how long an hour bucket is kept: the 7 d range and
	// a day's margin.
	HourRetention = 8 * 24 * time.Hour
	// DefaultFlushEvery is how often Run writes what was counted.
	DefaultFlushEvery = 5 * time.Second
)

// LatencyBounds are the upper bounds of the latency histogram's buckets,
// in milliseconds; a last bucket takes everything slower. Percentiles are
// read as the upper bound of the bucket they fall in.
var LatencyBounds = [...]int64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// The hash fields of a bucket.
const (
	fSuccess   = "s"  // attempts classed success
	fRetryable = "r"  // attempts classed retryable
	fPermanent = "p"  // attempts classed permanent
	fDead      = "d"  // dead letters made
	fLatSum    = "ms" // sum of the attempts' durations, ms
	fLatPrefix = "b"  // b0 … b12: attempts per latency bucket
)

// counts are one endpoint's figures of one minute.
type counts struct {
	success, retryable, permanent, dead, latSum int64
	lat                                         [len(LatencyBounds) + 1]int64
}

// add adds o into c.
func (c *counts) add(o *counts) {
	c.success += o.success
	c.retryable += o.retryable
	c.permanent += o.permanent
	c.dead += o.dead
	c.latSum += o.latSum
	for i := range c.lat {
		c.lat[i] += o.lat[i]
	}
}

// bucket names one endpoint's minute.
type bucket struct {
	endpoint string
	minute   int64 // Unix minutes
}

// Options configure a Recorder.
type Options struct {
	// Now is the clock the buckets are keyed by: the shared clock
	// (corrected to Redis's, contract §1), so replicas agree on minutes.
	// Default time.Now.
	Now func() time.Time
	// FlushEvery is how often Run writes. Default DefaultFlushEvery.
	FlushEvery time.Duration
	// Logger receives a warning when a write fails (the counts are kept
	// for the next one). Default: discard.
	Logger *slog.Logger
}

// maxPending bounds the buckets a Recorder keeps while Redis refuses its
// writes: past it the rest are dropped (a chart gap, never unbounded
// memory).
const maxPending = 4096

// Recorder counts attempts and dead letters in memory and writes them to
// Redis (Run, Flush). It is safe for concurrent use; the zero value is not
// usable: use New.
type Recorder struct {
	rdb redis.UniversalClient
	o   Options
	mu  sync.Mutex
	cur map[bucket]*counts
	// failing is true from a failed write to the next good one: an outage
	// is logged once, not every FlushEvery.
	failing bool
}

// New returns a Recorder writing to rdb.
func New(rdb redis.UniversalClient, o Options) *Recorder {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultFlushEvery
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Recorder{rdb: rdb, o: o, cur: map[bucket]*counts{}}
}

// at returns the counts of endpoint's current minute; r.mu is held.
func (r *Recorder) at(endpoint string) *counts {
	b := bucket{endpoint, r.o.Now().Unix() / 60}
	c := r.cur[b]
	if c == nil {
		c = &counts{}
		r.cur[b] = c
	}
	return c
}

// Attempt counts one attempt sent to endpoint, classed outcome (success,
// retryable or permanent; contract §2), that took d. Refusals before
// sending (rejected) are not attempts and are ignored.
func (r *Recorder) Attempt(endpoint string, outcome policy.Outcome, d time.Duration) {
	ms := d.Milliseconds()
	i := 0
	for i < len(LatencyBounds) && ms > LatencyBounds[i] {
		i++
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.at(endpoint)
	switch outcome {
	case policy.Success:
		c.success++
	case policy.Retryable:
		c.retryable++
	case policy.Permanent:
		c.permanent++
	default:
		return
	}
	c.latSum += ms
	c.lat[i]++
}

// DeadLetter counts n callouts of endpoint that became dead letters.
func (r *Recorder) DeadLetter(endpoint string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at(endpoint).dead += int64(n)
}

// flushTimeout bounds each of Run's writes (a pipeline of a few dozen
// commands takes milliseconds): a replica stopping while Redis hangs must
// not wait on it (go-redis honours a deadline, not a cancellation, in a
// read under way).
const flushTimeout = time.Second

// Run writes what was counted every Options.FlushEvery until ctx ends,
// then once more (skipped while writes fail) so a stopping replica loses
// nothing; each write is bounded by flushTimeout.
func (r *Recorder) Run(ctx context.Context) {
	t := time.NewTicker(r.o.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			failing := r.failing
			r.mu.Unlock()
			if !failing {
				r.flush(context.WithoutCancel(ctx))
			}
			return
		case <-t.C:
			r.flush(ctx)
		}
	}
}

// flush is Flush bounded by flushTimeout (its error is logged by Flush).
func (r *Recorder) flush(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	_ = r.Flush(ctx)
}

// Flush writes every bucket counted since the last Flush in one pipelined
// round trip: per endpoint and minute, HINCRBY of each non-zero field into
// the minute bucket and the hour bucket, and their EXPIRE. On an error the
// counts are kept for the next Flush (at most maxPending buckets) and the
// error, wrapped, is returned; the first failure of a run of them is
// logged as a warning, the next good write as info.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	taken := r.cur
	r.cur = map[bucket]*counts{}
	r.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, c := range taken {
			minute := keyspace.StatsMinute(b.endpoint, b.minute)
			hour := keyspace.StatsHour(b.endpoint, b.minute/60)
			for _, key := range []string{minute, hour} {
				write(ctx, p, key, c)
			}
			p.Expire(ctx, minute, MinuteRetention)
			p.Expire(ctx, hour, HourRetention)
		}
		return nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if r.failing {
			r.failing = false
			r.o.Logger.Info("stats: writing the console's counts works again")
		}
		return nil
	}
	for b, c := range taken {
		if len(r.cur) >= maxPending {
			break
		}
		if have := r.cur[b]; have != nil {
			have.add(c)
		} else {
			r.cur[b] = c
		}
	}
	if !r.failing {
		r.failing = true
		r.o.Logger.Warn("stats: writing the console's counts failed; they are kept for the next write",
			slog.Any("error", err))
	}
	return &writeError{err}
}

// writeError is a failed Flush.
type writeError struct{ err error }

func (e *writeError) Error() string { return "stats: flush: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// write queues the HINCRBYs of c's non-zero fields into key.
func write(ctx context.Context, p redis.Pipeliner, key string, c *counts) {
	for _, f := range []struct {
		name string
		n    int64
	}{{fSuccess, c.success}, {fRetryable, c.retryable}, {fPermanent, c.permanent}, {fDead, c.dead}, {fLatSum, c.latSum}} {
		if f.n != 0 {
			p.HIncrBy(ctx, key, f.name, f.n)
		}
	}
	for i, n := range c.lat {
		if n != 0 {
			p.HIncrBy(ctx, key, fLatPrefix+strconv.Itoa(i), n)
		}
	}
}
