package dispatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/attempt"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// Disabler auto-disables an endpoint in the store when its outage began
// at least after ago on Redis's clock (contract §1, §6), else returns the
// zero result. *redisstore.Store implements it.
type Disabler interface {
	AutoDisable(ctx context.Context, endpoint string, after time.Duration, reason string) (policy.DisableResult, error)
}

// Watcher reacts to what each result did to its endpoint's circuit breaker:
// it counts and logs transitions, counts the waiting callouts a result shut
// the gate on as deferred (callout_deferred_total), and applies
// auto-disable (contract §6): an
// endpoint whose current outage — from its first counting failure after a
// success — has lasted disable_after is disabled, its pending callouts
// become dead letters (reason endpoint_disabled), and its owner is told:
// the disable queued the notification and the dead letters' writes in the
// Salesforce outbox in the same script; Ended wakes the writer for them.
type Watcher struct {
	Config  *config.Config
	Store   Disabler
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Ended, optional, is called after a disable that made dead letters or
	// is to be told to the owner: the Salesforce writer's Wake (it must
	// not block). nil: nobody.
	Ended func()
	// Stats, optional, counts the dead letters a disable made (the
	// console's charts).
	Stats attempt.Stats
	Now   func() time.Time
}

// Changed is called after every result that went through the breaker. A
// result that changed nothing — no transition, nothing held, no outage
// begun, ended or under way — returns at once: the loggers below cost 6
// allocations, and most results (a success on a closed breaker) are such.
func (w *Watcher) Changed(ctx context.Context, ep *config.Endpoint, ch policy.BreakerChange) {
	if quiet(ch) {
		return
	}
	log := w.Logger.With(slog.String("endpoint", ep.Name))
	breaker := log
	if ch.Partition != "" {
		// an organisation's breaker partition (contract §6)
		breaker = log.With(slog.String("issuer", ch.Partition))
	}
	switch {
	case ch.Opened:
		w.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "open").Inc()
		breaker.Warn("circuit breaker opened", slog.Int("consecutive_failures", ch.ConsecutiveFailures))
	case ch.Closed:
		w.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "closed").Inc()
		breaker.Info("circuit breaker closed")
	}
	if ch.Held > 0 {
		// The waiting callouts this result shut the gate on are held from
		// now: counted once, here, by the result that shut it.
		w.Metrics.Deferred.WithLabelValues(ep.Name, string(ch.HeldBy)).Add(float64(ch.Held))
	}
	if ch.OutageBegan {
		log.Warn("outage began")
	}
	if ch.OutageEnded {
		log.Info("outage ended")
	}
	if !policy.AutoDisable(w.Config.Policy, time.Time{}, ch.OutageStartedAt, w.now()) {
		return
	}
	w.disable(ctx, ep, "auto: no success since "+ch.OutageStartedAt.UTC().Format(time.RFC3339))
}

// quiet reports whether ch asks the watcher for nothing: no log line, no
// metric, and no outage whose length could reach disable_after.
func quiet(ch policy.BreakerChange) bool {
	return !ch.Opened && !ch.Closed && ch.Held == 0 && !ch.OutageBegan && !ch.OutageEnded &&
		ch.OutageStartedAt.IsZero()
}

// disable disables ep and hands on its new dead letters.
func (w *Watcher) disable(ctx context.Context, ep *config.Endpoint, reason string) {
	res, err := w.Store.AutoDisable(ctx, ep.Name, w.Config.Policy.DisableAfter, reason)
	if err != nil {
		w.Logger.Error("auto-disable failed", slog.String("endpoint", ep.Name), slog.Any("error", err))
		return
	}
	if !res.Newly {
		return
	}
	w.Metrics.BreakerTransitions.WithLabelValues(ep.Name, "disabled").Inc()
	w.Logger.Error("endpoint disabled: it failed for disable_after without a success; an admin must re-enable it",
		slog.String("endpoint", ep.Name), slog.String("reason", reason),
		slog.Int("dead_lettered", len(res.DeadLettered)))
	if n := len(res.DeadLettered); n > 0 {
		w.Metrics.DeadLetters.WithLabelValues(ep.Name, string(policy.DeadLetterEndpointDisabled)).Add(float64(n))
		if w.Stats != nil {
			w.Stats.DeadLetter(ep.Name, n)
		}
	}
	if w.Ended != nil {
		w.Ended()
	}
}

func (w *Watcher) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}
