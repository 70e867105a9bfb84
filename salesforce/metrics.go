package salesforce

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Metrics are the Salesforce writer's Prometheus metrics, registered on
// the registry the composition root passes in (no global registry). Names
// and labels are part of the operating contract (deploy/ alert rules).
//
// OutboxItems, OutboxOldestDue and APIUsage are computed when they are
// scraped (from the outbox in Redis and the client's last
// Sforce-Limit-Info), never from a value set on a timer; a scrape while
// Redis cannot answer leaves the outbox gauges out.
type Metrics struct {
	// OutboxItems is the number of entries in the outbox (due, being
	// written, or waiting to be retried), summed over every shard. Every
	// replica reports the same total: aggregate with max, not sum.
	OutboxItems prometheus.Collector
	// OutboxOldestDue is how long the longest-waiting due entry of the
	// outbox has been due, in seconds (0 when none is due). Claimed entries
	// in flight and entries waiting for a retry are not due, so it grows
	// only while due writes are not being sent: every writer dead or stuck,
	// writes paused or deferred. Every replica reports the same value:
	// aggregate with max.
	OutboxOldestDue prometheus.Collector
	// Requests counts Salesforce API calls by result: ok, retryable,
	// invalid_session, limit_exceeded, concurrent_limit, rejected (Class);
	// and failed token calls, as auth_failed or retryable.
	Requests *prometheus.CounterVec
	// APIUsage is the last api-usage share of the org's daily API limit
	// Salesforce reported (Sforce-Limit-Info used/limit), 0–1, or the
	// connected app's per-app-api-usage share when that is higher.
	APIUsage prometheus.Collector
	// WriteErrors counts writes Salesforce refused, by error code: a whole
	// collection refused as it is (INVALID_FIELD, INVALID_TYPE: a field or
	// object the integration user cannot see) once, each refused record
	// once — as it is (a validation rule, STRING_TOO_LONG), for now (a
	// lock, UNABLE_TO_LOCK_ROW) or during read-only maintenance
	// (INSERT_UPDATE_DELETE_NOT_ALLOWED_DURING_MAINTENANCE).
	WriteErrors *prometheus.CounterVec
	// WritesPaused is 1 while every Salesforce write is paused, by reason:
	// api_limit (REQUEST_LIMIT_EXCEEDED, the daily API allocation) or
	// storage_limit (STORAGE_LIMIT_EXCEEDED, the org's data storage full);
	// 0 otherwise. Computed at scrape time from the org-wide pause stored
	// in Redis (its end and reason), so every replica reports the pause it
	// honours, not only the one that met the error (this replica's own
	// knowledge when Redis cannot be read). docs/salesforce.md "Storage
	// full".
	WritesPaused prometheus.Collector
	// WritesDropped counts queued writes dropped because the callout
	// record they are written from was gone, by entry kind (m a dead
	// letter's mirror, e a completion event): discarded meanwhile, or
	// expired past Writer.KeepPending's cap.
	WritesDropped *prometheus.CounterVec
	// RecordsAtCap is how many callout records queued writes still need
	// have been kept KeepCap past their retention and are now left to
	// expire (Writer.KeepPending, set at each of its runs on this replica):
	// above 0, those writes will be dropped unless Salesforce takes them
	// within the hour. Aggregate with max.
	RecordsAtCap prometheus.Gauge

	items, oldest, usage *scrapeGauge
	// writer is the writer whose outbox and client the scrape reads.
	writer atomic.Pointer[Writer]
}

// NewMetrics creates the metrics and registers them on reg. It returns an
// error if any name is already registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callout_salesforce_requests_total",
			Help: "Salesforce calls by result (ok|retryable|invalid_session|limit_exceeded|concurrent_limit|auth_failed|storage_full|maintenance|rejected).",
		}, []string{"result"}),

		WriteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callout_salesforce_write_errors_total",
			Help: "Salesforce writes refused, by error code (a whole collection once, a record once).",
		}, []string{"code"}),
	}
	m.WritesPaused = &pausedGauge{m: m, desc: prometheus.NewDesc("callout_salesforce_writes_paused",
		"1 while every Salesforce write is paused (the org-wide pause in Redis), by reason (api_limit|storage_limit).",
		[]string{"reason"}, nil)}
	m.WritesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "callout_salesforce_writes_dropped_total",
		Help: "Queued Salesforce writes dropped because their callout record was gone, by entry kind (m|e).",
	}, []string{"kind"})
	m.RecordsAtCap = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "callout_salesforce_outbox_records_at_cap",
		Help: "Callout records queued Salesforce writes need, kept the 7-day cap past their retention and now left to expire.",
	})
	for _, kind := range []string{policy.EntryMirror, policy.EntryResult} {
		m.WritesDropped.WithLabelValues(kind) // at 0 from the start: increase() sees the first
	}
	m.items = m.gauge(prometheus.GaugeOpts{Name: "callout_salesforce_outbox_items",
		Help: "Entries in the Salesforce outbox (due, being written or waiting to be retried), all shards."},
		func(ctx context.Context, w *Writer) (float64, bool) {
			n, err := w.o.Outbox.Len(ctx)
			return float64(n), err == nil
		})
	m.oldest = m.gauge(prometheus.GaugeOpts{Name: "callout_salesforce_outbox_oldest_due_seconds",
		Help: "Seconds the longest-waiting due Salesforce outbox entry has been due (0: none due), all shards."},
		func(ctx context.Context, w *Writer) (float64, bool) {
			due, oldest, err := w.o.Outbox.DueStats(ctx)
			if err != nil || due == 0 {
				return 0, err == nil
			}
			return max(0, w.o.Now().Sub(oldest).Seconds()), true
		})
	m.usage = m.gauge(prometheus.GaugeOpts{Name: "callout_salesforce_api_usage_ratio",
		Help: "Share of the org's daily API limit used, as Salesforce last reported it (Sforce-Limit-Info)."},
		func(_ context.Context, w *Writer) (float64, bool) { return w.o.API.UsageRatio(), true })
	m.OutboxItems, m.OutboxOldestDue, m.APIUsage = m.items, m.oldest, m.usage
	for _, c := range []prometheus.Collector{m.OutboxItems, m.OutboxOldestDue, m.Requests, m.APIUsage, m.WriteErrors,
		m.WritesPaused, m.WritesDropped, m.RecordsAtCap} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Result counts one call's result; use it as Options.OnResult. A nil
// *Metrics counts nothing.
func (m *Metrics) Result(result string) {
	if m != nil {
		m.Requests.WithLabelValues(result).Inc()
	}
}

// scrapeTimeout bounds the Redis reads of one scrape of an outbox gauge.
const scrapeTimeout = 5 * time.Second

// scrapeGauge is a gauge computed when it is scraped, from the writer the
// Metrics observe (none yet: no sample).
type scrapeGauge struct {
	m    *Metrics
	desc *prometheus.Desc
	read func(ctx context.Context, w *Writer) (float64, bool)
}

func (m *Metrics) gauge(o prometheus.GaugeOpts, read func(context.Context, *Writer) (float64, bool)) *scrapeGauge {
	return &scrapeGauge{m: m, desc: prometheus.NewDesc(o.Name, o.Help, nil, nil), read: read}
}

func (g *scrapeGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *scrapeGauge) Collect(ch chan<- prometheus.Metric) {
	g.m.scrape(func(ctx context.Context, w *Writer) {
		if v, ok := g.read(ctx, w); ok {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
		}
	})
}

// scrape calls read with the writer the scrape reads and a context of
// scrapeTimeout; not at all while no writer is set.
func (m *Metrics) scrape(read func(ctx context.Context, w *Writer)) {
	w := m.writer.Load()
	if w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	read(ctx, w)
}

// pausedGauge is callout_salesforce_writes_paused, read when scraped from
// the pause every replica honours (Writer.paused): 1 for its reason while
// it lasts, 0 for the other reason and after it ended.
type pausedGauge struct {
	m    *Metrics
	desc *prometheus.Desc
}

func (g *pausedGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *pausedGauge) Collect(ch chan<- prometheus.Metric) {
	g.m.scrape(func(ctx context.Context, w *Writer) {
		till, why, err := w.o.Outbox.PausedUntil(ctx)
		if err != nil {
			w.mu.Lock()
			till, why = w.pausedTill, w.pauseWhy
			w.mu.Unlock()
		}
		on := till.After(w.o.Now())
		for _, r := range []string{pauseAPILimit, pauseStorage} {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, b2f(on && why == r), r)
		}
	})
}
