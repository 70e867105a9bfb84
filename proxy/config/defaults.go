package config

import (
	"maps"
	"slices"
	"time"
)

// DefaultAPIVersion is the Salesforce REST API version used when the
// salesforce block gives none (ARCHITECTURE.md "Salesforce facts").
const DefaultAPIVersion = "68.0"

// Salesforce outbox defaults (config.Salesforce).
const (
	DefaultOutboxInterval    = time.Second
	DefaultPollInterval      = time.Minute
	DefaultReprocessInterval = time.Minute
	DefaultAPIUsageSlowdown  = 0.8
	DefaultSlowdownInterval  = 30 * time.Second
	DefaultLimitPause        = 15 * time.Minute
	DefaultRequestTimeout    = 30 * time.Second
	DefaultBatchLinger       = 2 * time.Second
	DefaultBatchMaxBytes     = 8 << 20
	DefaultFlushLease        = 15 * time.Second
	// DefaultPubSub is the Pub/Sub API endpoint of every org ("Pub/Sub
	// API Endpoint"); PubSubOff turns the subscription off.
	DefaultPubSub = "api.pubsub.salesforce.com:7443"
	PubSubOff     = "off"
	// MaxBatchLinger and the bounds of batch_max_bytes (validate).
	MaxBatchLinger      = time.Minute
	MinBatchMaxBytes    = 64 << 10
	MaxBatchMaxBytesCap = 50_000_000
	// MinFlushLease and MaxFlushLease bound flush_lease (validate).
	MinFlushLease = time.Second
	MaxFlushLease = 5 * time.Minute
)

// Auth defaults (contract §9, §10). A zero value, given or not, means the
// default; proxy/auth treats zero the same way.
const (
	DefaultMaxTokenLifetime = time.Hour
	DefaultLeeway           = 30 * time.Second
)

// Idempotency values of Endpoint.Idempotency (contract §3).
const (
	// IdempotencyHonoured: the upstream deduplicates on Idempotency-Key, so
	// an attempt that got no answer may be retried. The default.
	IdempotencyHonoured = "honoured"
	// IdempotencyIgnored: the upstream does not; a write that was sent but
	// got no answer becomes a dead letter with reason `ambiguous`.
	IdempotencyIgnored = "ignored"
)

// Admin token scopes of AdminToken.Scope (contract §9).
const (
	// ScopeRead allows the admin API's GET routes.
	ScopeRead = "read"
	// ScopeWrite allows everything, reads included.
	ScopeWrite = "write"
)

// JWT algorithms accepted in auth.algorithms (RFC 7518 §3.1 names).
const (
	AlgRS256 = "RS256"
	AlgRS512 = "RS512"
	AlgHS256 = "HS256"
)

// applyDefaults fills zero auth durations and what depends on other keys:
// the algorithm list, each endpoint's name, idempotency and inherited
// limits, the Salesforce API version. Negative limits are left for validate
// to report. An endpoint shared through a YAML alias is copied first.
func (c *Config) applyDefaults() {
	c.Limits.applyDefaults()
	c.Limits.fairInflightShare(len(c.Auth.Issuers), c.Policy.MaxRequestBytes+c.Policy.MaxResponseBytes)
	c.Limits.fairConnectionShare(len(c.Auth.Issuers))
	c.Log.applyDefaults()
	inherit(&c.Redis.GateStaleness, DefaultGateStaleness)
	if c.Redis.Durability == "" {
		c.Redis.Durability = DurabilityLocal
	}
	if c.Redis.Durability != DurabilityLocal {
		inherit(&c.Redis.DurabilityTimeout, DefaultDurabilityTimeout)
	}
	c.Tracing.applyDefaults()
	inherit(&c.Auth.MaxTokenLifetime, DefaultMaxTokenLifetime)
	inherit(&c.Auth.Leeway, DefaultLeeway)
	if len(c.Auth.Algorithms) == 0 && c.Auth.hasCertificates() {
		c.Auth.Algorithms = []string{AlgRS256}
	}
	shared := map[*Endpoint]bool{}
	for name, e := range c.Endpoints {
		if e == nil {
			continue
		}
		if shared[e] { // `b: *a` decodes to a's very pointer
			e = e.clone()
			c.Endpoints[name] = e
		}
		shared[e] = true
		e.Name = name
		if e.Idempotency == "" {
			e.Idempotency = IdempotencyHonoured
		}
		ownConnect, ownHeader := e.ConnectTimeout != 0, e.HeaderTimeout != 0
		inherit(&e.ConnectTimeout, c.Policy.ConnectTimeout)
		inherit(&e.HeaderTimeout, c.Policy.HeaderTimeout)
		inherit(&e.AttemptTimeout, c.Policy.AttemptTimeout)
		// An endpoint may lower its attempt limit alone (contract §3): the
		// connect and header limits it inherits shrink to fit inside it.
		// Limits it sets itself are validated as written.
		if !ownConnect && e.AttemptTimeout > 0 {
			e.ConnectTimeout = min(e.ConnectTimeout, e.AttemptTimeout)
		}
		if !ownHeader && e.AttemptTimeout > 0 {
			e.HeaderTimeout = min(e.HeaderTimeout, e.AttemptTimeout)
		}
		inherit(&e.BreakerFailures, c.Policy.BreakerFailures)
		inherit(&e.BreakerProbeInterval, c.Policy.BreakerProbeInterval)
		inherit(&e.Breaker.Partition, BreakerPartitionOrganisation)
		inherit(&e.MaxBacklogItems, c.Policy.MaxBacklogItems)
		inherit(&e.MaxBacklogBytes, c.Policy.MaxBacklogBytes)
		inherit(&e.MaxBacklogItemsPerIssuer, c.Policy.MaxBacklogItemsPerIssuer)
		inherit(&e.MaxBacklogBytesPerIssuer, c.Policy.MaxBacklogBytesPerIssuer)
		// A fair share by default (contract §10): with n organisations allowed
		// on the endpoint, none may hold more than 1/n of its backlog.
		if n := int64(c.Organisations(e)); n > 1 {
			inherit(&e.MaxBacklogItemsPerIssuer, max(e.MaxBacklogItems/n, 1))
			inherit(&e.MaxBacklogBytesPerIssuer, max(e.MaxBacklogBytes/n, 1))
		}
	}
	if sf := c.Salesforce; sf != nil {
		inherit(&sf.APIVersion, DefaultAPIVersion)
		inherit(&sf.OutboxInterval, DefaultOutboxInterval)
		inherit(&sf.PollInterval, DefaultPollInterval)
		inherit(&sf.ReprocessInterval, DefaultReprocessInterval)
		inherit(&sf.APIUsageSlowdown, DefaultAPIUsageSlowdown)
		inherit(&sf.SlowdownInterval, DefaultSlowdownInterval)
		inherit(&sf.LimitPause, DefaultLimitPause)
		inherit(&sf.RequestTimeout, DefaultRequestTimeout)
		inherit(&sf.BatchLinger, DefaultBatchLinger)
		inherit(&sf.BatchMaxBytes, DefaultBatchMaxBytes)
		inherit(&sf.FlushLease, DefaultFlushLease)
		inherit(&sf.PubSub, DefaultPubSub)
	}
}

// inherit sets *v to def when *v is zero.
func inherit[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// clone returns a copy of e that shares no slice or map with it.
func (e *Endpoint) clone() *Endpoint {
	n := *e
	n.AllowedNetworks = slices.Clone(e.AllowedNetworks)
	n.Networks = slices.Clone(e.Networks)
	n.AllowedIssuers = slices.Clone(e.AllowedIssuers)
	n.Headers = maps.Clone(e.Headers)
	n.OAuth2 = e.OAuth2.clone()
	n.TLS = copyOf(e.TLS)
	n.StandardWebhooks = e.StandardWebhooks.clone()
	n.AWSSigV4 = copyOf(e.AWSSigV4)
	n.Redact = Redact{
		Headers:    slices.Clone(e.Redact.Headers),
		Query:      slices.Clone(e.Redact.Query),
		JSONFields: slices.Clone(e.Redact.JSONFields),
	}
	n.BaseURL = copyOf(e.BaseURL)
	return &n
}

// copyOf returns a new copy of *p, nil for nil: the clone of a value that
// holds no slice or map of its own (UpstreamTLS, AWSSigV4, a parsed URL).
func copyOf[T any](p *T) *T {
	if p == nil {
		return nil
	}
	n := *p
	return &n
}
