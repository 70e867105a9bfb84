package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	adminapi "github.com/calloutproxy/callout-proxy/proxy/admin"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/outbox"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/sfsub"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/calloutproxy/callout-proxy/salesforce"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// newSalesforceWriter builds the Salesforce writer of the salesforce
// section (contract §7, §8): the JWT bearer client (returned too: the
// Pub/Sub subscription authenticates with its token) and the outbox
// consumer, with its metrics on reg. It returns nil when the section is absent: dead
// letters then stay in the proxy's own store (contract §10). now is the
// replica's Redis-corrected clock. store must have
// been made with redisstore.Options.Outbox set; ob is the outbox its
// scripts queue into. Errors: an unreadable key or client id (a
// configuration error).
func newSalesforceWriter(cfg *config.Config, store *redisstore.Store, ob *outbox.Outbox, reg prometheus.Registerer,
	getenv func(string) string, logger *slog.Logger, owner string, tp trace.TracerProvider,
	now func() time.Time) (*salesforce.Writer, *sfapi.Client, error) {
	sf := cfg.Salesforce
	if sf == nil {
		return nil, nil, nil
	}
	clientID, err := sf.ClientID(getenv)
	if err != nil {
		return nil, nil, err
	}
	pem, err := os.ReadFile(sf.PrivateKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("salesforce.private_key_file: %w", err)
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pem)
	if err != nil {
		return nil, nil, fmt.Errorf("salesforce.private_key_file: %w", err)
	}
	m, err := salesforce.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	client, err := sfapi.NewClient(sfapi.Options{
		Credentials: sfapi.Credentials{LoginURL: sf.LoginURL, Audience: sf.Audience, ClientID: clientID,
			Username: sf.Username, Key: key},
		APIVersion: sf.APIVersion, RequestTimeout: sf.RequestTimeout, OnResult: m.Result, Logger: logger,
	})
	if err != nil {
		return nil, nil, err
	}
	w, err := salesforce.NewWriter(salesforce.WriterOptions{
		API: client, Store: store, Outbox: ob, Salesforce: *sf,
		Endpoints: sfEndpoints(cfg.Endpoints), DeadLetterRetention: cfg.Policy.DeadLetterRetention,
		IdempotencyRetention: cfg.Policy.IdempotencyRetention,
		Metrics:              m, Logger: logger, Owner: owner, TracerProvider: tp,
		// The replica's Redis-corrected clock, as the outbox that converts
		// the writer's instants into durations (ARCHITECTURE.md "One clock").
		Now: now,
	})
	return w, client, err
}

// sfEndpoints is what the Salesforce writer needs of the configured
// endpoints: owners, redaction (with the injected header names) and
// completion events.
func sfEndpoints(eps map[string]*config.Endpoint) map[string]salesforce.Endpoint {
	out := make(map[string]salesforce.Endpoint, len(eps))
	for name, ep := range eps {
		if ep == nil {
			continue
		}
		injected := append(slices.Sorted(maps.Keys(ep.Headers)), ep.SigningHeaders()...)
		out[name] = salesforce.Endpoint{Owner: ep.Owner, Redact: redact.New(ep.Redact, injected),
			CompletionEvents: ep.CompletionEvents}
	}
	return out
}

// sfEvents wakes the Salesforce writer when an admin's disable made dead
// letters (admin.Events): the store queued their writes in the same
// script already, so nothing is lost if this call never happens; it only
// saves waiting for the writer's next tick.
type sfEvents struct{ w *salesforce.Writer }

var _ adminapi.Events = sfEvents{}

func (e sfEvents) Finished(context.Context, policy.Finished) { e.w.Wake() }

// onReplay marks a replayed dead letter's Failed_Callout__c record
// Reprocessing, naming the new chain (contract §8); the chain's ending then
// makes it Reprocessed or Failed Again. Nil without Salesforce.
func onReplay(sf *salesforce.Writer, logger *slog.Logger) func(context.Context, replay.Result) {
	if sf == nil {
		return nil
	}
	return func(ctx context.Context, r replay.Result) {
		if !r.Created {
			return
		}
		if err := sf.StatusChanged(ctx, r.DeadLetterID, policy.RecordReprocessing, r.ReplayID); err != nil {
			logger.Warn("queuing the Reprocessing status failed", slog.String("callout_id", r.DeadLetterID),
				slog.Any("error", err))
		}
	}
}

// sfRuntime is the Salesforce side's loops besides the writer: the
// Pub/Sub subscription to reprocess requests, or, without one, the poller.
type sfRuntime struct {
	sub *salesforce.Subscription
	rp  *salesforce.Reprocessor
}

// run runs the subscription (its polls run only while its stream is
// down) or the poller until ctx ends.
func (r *sfRuntime) run(ctx context.Context) {
	if r.sub != nil {
		r.sub.Run(ctx)
		return
	}
	r.rp.Run(ctx)
}

// openSalesforce builds, with a salesforce section, the writer, the
// reprocess poller of Reprocess Requested records (contract §8 "Admins
// reprocess from Salesforce": over the replay runner of the generation in
// force, the outbox's request claims and the store's replay marks) and
// the subscription; nothing without one. Errors: a ConfigError for
// an unreadable key or client id; the subscription state's scripts.
func (a *App) openSalesforce() error {
	cfg := a.cfg.Load()
	sf, client, err := newSalesforceWriter(cfg, a.store, a.outbox, a.reg, a.o.Getenv, a.logger, randomToken(), a.tp,
		a.shared)
	if err != nil {
		return ConfigError{err}
	}
	if sf == nil {
		return nil
	}
	a.sf = sf
	// With pubsub: off the poller leaves the polls to a replica that
	// subscribes (the subscriber lease, sfsub) and, while none does, looks
	// at the requests a subscriber deferred.
	o := salesforce.ReprocessOptions{Writer: sf, Requests: a.outbox, Marks: a.dead,
		Replayer: reprocessReplayer{func() *replay.Service { return a.cur.Load().replays }}}
	if cfg.Salesforce.PubSub == config.PubSubOff {
		state, err := sfsub.New(a.rdb, salesforce.ChangeEventTopic, a.store.Scripts())
		if err != nil {
			return err
		}
		o.Subscribed, o.Deferred = state.Held, state
	}
	rp, err := salesforce.NewReprocessor(o)
	if err != nil {
		return err
	}
	sub, closeSubscription, err := newSubscription(cfg, client.PubSubAuth, rp, a.rdb, a.store.Scripts())
	if err != nil {
		return err
	}
	a.closers = append(a.closers, closeSubscription)
	a.sfLoops = &sfRuntime{sub: sub, rp: rp}
	return nil
}

// reprocessReplayer is the replay runner in force as the reprocess poller
// needs it: its errors are the domain's replay errors, which the poller
// answers (salesforce.Replayer).
type reprocessReplayer struct{ s func() *replay.Service }

var _ salesforce.Replayer = reprocessReplayer{}

func (r reprocessReplayer) ReplayOne(ctx context.Context, id, by string) (string, error) {
	return r.s().ReplayOne(ctx, id, by)
}
