package dispatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// StateReader is what the Gatherer needs of the store.
// *redisstore.Store implements it.
type StateReader interface {
	TryLock(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error)
}

// Gatherer sets the backlog and breaker-state gauges from the store every
// Every (default 15s). One replica at a time gathers, holding a lock in
// Redis; the others clear their gauges, so a sum or max over replicas is
// the true value. It reads each endpoint's state with one pipelined round
// trip (HGETALL and ZCARDs) — never a scan on scrape.
type Gatherer struct {
	Config  *config.Config
	Store   StateReader
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Owner identifies this replica in the lock (a random token).
	Owner string
	Every time.Duration
}

// Run gathers until ctx ends.
func (g *Gatherer) Run(ctx context.Context) {
	every := g.Every
	if every <= 0 {
		every = 15 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		g.Gather(ctx, every)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Gather takes (or renews) the lock for 2×every and, when held, sets the
// gauges of every configured endpoint.
func (g *Gatherer) Gather(ctx context.Context, every time.Duration) {
	held, err := g.Store.TryLock(ctx, "gatherer", g.Owner, 2*every)
	if err != nil || !held {
		g.Metrics.BacklogItems.Reset()
		g.Metrics.BreakerState.Reset()
		g.Metrics.BreakerPartitions.Reset()
		return
	}
	for _, name := range g.Config.EndpointNames() {
		st, err := g.Store.EndpointState(ctx, name)
		if err != nil {
			g.Logger.Warn("gathering endpoint state failed", slog.String("endpoint", name), slog.Any("error", err))
			continue
		}
		g.Metrics.BacklogItems.WithLabelValues(name).Set(float64(st.Due + st.Leased))
		current := string(st.Breaker)
		if st.Disabled {
			current = "disabled"
		}
		for _, s := range []string{"closed", "open", "half_open", "disabled"} {
			v := 0.0
			if s == current {
				v = 1
			}
			g.Metrics.BreakerState.WithLabelValues(name, s).Set(v)
		}
		parts := map[policy.BreakerState]int{}
		for _, p := range st.Partitions {
			parts[p.Breaker]++
		}
		for _, s := range []policy.BreakerState{policy.BreakerOpen, policy.BreakerHalfOpen} {
			g.Metrics.BreakerPartitions.WithLabelValues(name, string(s)).Set(float64(parts[s]))
		}
	}
}
