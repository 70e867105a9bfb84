// Package redisstore is the proxy's durable state in Redis: the per-endpoint
// delay queue with leases, the callout records, the idempotency
// reservations, the per-endpoint gate (circuit breaker, pause, disable,
// backlog) and the dead-letter index (contract §3–§7, ARCHITECTURE.md "Redis data
// model"). All Redis keys and Lua scripts of the proxy live here and in its
// subpackages: keyspace documents every key once, lua/ holds one file per
// script of the core, and the seams the core does not apply atomically are
// packages of their own beside it (jobs: replay jobs, contract §8; outbox:
// the Salesforce outbox, contract §7), which the core does not import. The
// core's scripts still queue outbox entries, in the same script as the dead
// letter, ending or disable that causes them (Options.Outbox).
//
// Every key of one endpoint shares a hash tag and every script receives all
// keys it touches in KEYS, so the store works unchanged on a single node,
// Redis Cluster and the embedded miniredis. Redis's clock decides every
// instant of shared state: the scripts read TIME (script.Clock) and the
// store passes them durations (Options.Now, Options.PinScriptTime).
//
// A callout's life: Begin (synchronous first attempt, leased to the
// ingress) or Enqueue (scheduled or held); Claim leases due callouts to a
// dispatcher worker; Complete fences on the lease token and acks,
// reschedules, continues inline or dead-letters, updating the breaker in
// the same script; Reap returns expired leases.
//
// Two packages the core owns keep what a replica remembers between
// scripts: gateview reads the gate (gate_read.lua, admit.lua, composed with
// the core's lib.lua) and keeps the views the scripts of a sharded
// endpoint's other queues act on; queues knows which queues each endpoint's
// callouts may be in.
//
// The gate cache (proxy/redisstore/gatecache) is not part of the core and
// the core imports nothing of it: it wraps Admit, polls through ReadGates,
// and is told of this Store's own gate changes by Options.GateChanged.
package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/hold"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/issuers"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/queues"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Options configures a Store. The zero value works.
type Options struct {
	// Now is this replica's clock. Redis's clock (TIME, read inside every
	// script) decides every instant of shared state — due times, leases,
	// probe times and tokens, pauses, disable times, retentions — and Now
	// only measures the durations the store passes (a backoff until
	// Completion.NextAttemptAt, a pause until PausedUntil) and stamps what
	// a replica observes itself (an attempt's start). The composition root
	// passes its Redis-corrected clock (proxy/skew Monitor.Now), so those
	// stamps agree with Redis's (ARCHITECTURE.md "One clock"). Default
	// time.Now.
	Now func() time.Time
	// PinScriptTime, for tests that travel in time only, makes every script
	// take Now() as its now instead of reading TIME, so a test clock
	// (policy/clocktest) moves the scripts' clock on real Redis too. Never
	// set in production: a pinned clock is exactly the skew that makes two
	// replicas disagree about a lease (contract §1).
	PinScriptTime bool
	// Scripts is client's script layer when the caller made it: only tests
	// that run the EVALSHA/EVAL path next to Redis Functions give one
	// (script.AttachEval). nil: New attaches client (script.Attach), as the
	// binary does.
	Scripts *script.Functions
	// Rand is the source of callout ids and lease tokens (16 bytes each).
	// It need not be safe for concurrent use. Default crypto/rand.Reader.
	Rand io.Reader
	// ResponseBodyCap is the most bytes of an upstream response body kept
	// on a callout record (contract §5 "a stored body is kept only up to a
	// cap"). Zero: 64 KiB. Negative: no body is kept.
	ResponseBodyCap int64
	// IdempotencyRetention is the TTL of a succeeded or failed callout and
	// its reservation (policy idempotency_retention, contract §5). Default 24h.
	IdempotencyRetention time.Duration
	// DeadLetterRetention is the TTL of a dead letter and its reservation
	// (policy dead_letter_retention, contract §7). Default 720h.
	DeadLetterRetention time.Duration
	// Logger receives the store's rare warnings. Default: discard.
	Logger *slog.Logger
	// Outbox, when true, makes the scripts that end callouts queue the
	// Salesforce writes they cause in the same script (proxy/redisstore/outbox, contract §7
	// "durable outbox"): set it when a salesforce section is configured
	// and an Outbox consumer runs. False: nothing is queued (dead letters
	// stay in the proxy's own store, contract §10).
	Outbox bool
	// Notify reports whether an owner notification about endpoint reaches
	// anyone (the composition root passes config.CanNotify: an owner or a
	// webhook, with a salesforce section). The scripts that end callouts
	// and disable endpoints decide with it whether the owner is told
	// (lib.lua owner_notice), once, atomically with the dead letter or the
	// disable (contract §6); CompleteResult.NotifyOwner is their answer, for
	// no one to decide again. nil: every endpoint's owner can be told.
	Notify func(endpoint string) bool
	// RequireLayout, when true, makes every write of a new callout and
	// every claim wait for a confirmed layout: until CheckLayout or Migrate
	// has succeeded once, each such call checks the layout first (one
	// round trip) and fails — nothing written — with its error (a
	// *LayoutError, or ErrUnavailable). The composition root sets it, so a
	// replica that started while Redis was down never writes into a store
	// of another layout in the seconds before its background check runs.
	RequireLayout bool
	// GateChanged, optional, is called with an endpoint's name right after
	// this Store changed that endpoint's gate, before the call that changed
	// it returns: Complete or RecordResult reporting a breaker that opened
	// or closed, an outage that began or ended, a probe's result or a
	// pause; Disable newly disabling; Enable; ResetBreaker. Every replica learns of the
	// change by a message on keyspace.GateChannel too; this hook is how
	// the replica's own gate cache (proxy/redisstore/gatecache, Cache.Changed)
	// stops using its entry at once, without waiting for its own message.
	// It must not block. nil: nobody is told.
	GateChanged func(endpoint string)
	// Shards returns an endpoint's shard count (config endpoints.*.shards,
	// proxy/redisstore/queues); nil or a result below 1: 1 for every endpoint.
	Shards func(endpoint string) int
	// Partitioned reports whether an endpoint's circuit breaker is
	// partitioned by organisation (config endpoints.*.breaker.partition
	// organisation, contract §6): each (endpoint, issuer) pair then has its
	// own breaker, probe and counters. nil or false: one breaker for the
	// endpoint.
	Partitioned func(endpoint string) bool
	// OpenPartitions returns how many organisations' open breaker
	// partitions open an endpoint's own breaker (contract §6): 2, or 1
	// where one organisation alone may call the endpoint (the composition
	// root: the issuers allowed on it). nil or below 1: 2.
	OpenPartitions func(endpoint string) int
	// Acknowledger, when set, confirms every create that answers a caller
	// (a new callout, or the one holding its key) as durable before Begin
	// or Enqueue returns (config redis.durability replicated or fsync,
	// contract §11; proxy/redisstore/durable); they fail with
	// policy.ErrNotDurable when it does not. nil: durability local, nothing
	// waited for.
	Acknowledger Acknowledger
}

// Acknowledger confirms the store's writes durable (contract §11). Ack
// returns once every write the caller saw succeed on the primary that owns
// key, key's own among them, is confirmed as the configured durability
// demands. Errors wrap policy.ErrNotDurable when it is not (the writes may
// exist). Implemented by proxy/redisstore/durable.
type Acknowledger interface {
	Ack(ctx context.Context, key string) error
}

// DefaultResponseBodyCap is Options.ResponseBodyCap's default, in bytes.
const DefaultResponseBodyCap = 64 << 10

// maxBatch bounds one claim, reap or drain script run.
const maxBatch = 1000

// Store is the Redis store. It is safe for concurrent use.
type Store struct {
	rdb     redis.UniversalClient
	scripts *script.Functions // client's script layer (Scripts)
	now     func() time.Time
	randMu  sync.Mutex
	rand    io.Reader
	bodyCap int64
	idemTTL time.Duration
	dlTTL   time.Duration
	log     *slog.Logger
	lua     scripts
	outbox  bool
	// seen remembers endpoints already added to cp:endpoints by this Store.
	seen sync.Map
	// onGate is Options.GateChanged.
	onGate func(endpoint string)
	// issuers resolves issuer tags (cp:iss).
	issuers     *issuers.Registry
	partitioned func(string) bool
	// openPartitions: Options.OpenPartitions.
	openPartitions func(string) int
	notifies       func(string) bool
	// queues: which queues each endpoint's callouts may be in.
	queues *queues.Tracker
	// gates reads the gate (gate_read.lua, admit.lua) and keeps the views
	// of it that the scripts of a sharded endpoint's other queues act on.
	gates *gateview.Views
	// held holds and releases the callouts waiting behind a gate that
	// shut or opened (package hold).
	held *hold.Walker
	// requireLayout and layoutOK: Options.RequireLayout, and whether the
	// layout has been confirmed (layout.go).
	requireLayout bool
	layoutOK      atomic.Bool
	acks          Acknowledger
	// pin: Options.PinScriptTime.
	pin bool
	// dead notes a replay chain's outcome on its dead letter's mark when
	// complete.lua cannot (complete.go).
	dead *deadletters.Store
}

// New returns a Store on client (a *redis.Client or *redis.ClusterClient),
// filling Options defaults. It does not contact Redis (see Ping). It
// attaches client to the script layer (script.Attach: the scripts run as
// Redis Functions where Redis allows, the mode logged once on
// Options.Logger); the store packages made on the same client register
// their scripts with Scripts, so the client has one function library.
func New(client redis.UniversalClient, opts Options) *Store {
	fns := opts.Scripts
	if fns == nil {
		fns = script.Attach(client, opts.Logger) // Redis Functions where Redis has them (script.Attach)
	}
	lua, lib, err := loadScripts(fns)
	if err != nil {
		panic(err) // the scripts are embedded: a build defect, not a runtime condition
	}
	s := &Store{scripts: fns,
		rdb: client, now: opts.Now, rand: opts.Rand, bodyCap: opts.ResponseBodyCap,
		idemTTL: opts.IdempotencyRetention, dlTTL: opts.DeadLetterRetention,
		log: opts.Logger, lua: lua, outbox: opts.Outbox, partitioned: opts.Partitioned, openPartitions: opts.OpenPartitions, notifies: opts.Notify,
		onGate: opts.GateChanged, requireLayout: opts.RequireLayout, acks: opts.Acknowledger, pin: opts.PinScriptTime,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	if s.bodyCap == 0 {
		s.bodyCap = DefaultResponseBodyCap
	}
	if s.idemTTL <= 0 {
		s.idemTTL = 24 * time.Hour
	}
	if s.dlTTL <= 0 {
		s.dlTTL = 720 * time.Hour
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.issuers = issuers.New(client)
	if s.gates, err = gateview.New(client, gateview.Options{Lib: lib, Now: s.now, PinScriptTime: s.pin, Scripts: fns}); err != nil {
		panic(err) // embedded too
	}
	if s.queues, err = queues.New(client, queues.Options{Now: s.now, Shards: opts.Shards, Partition: s.partition, Scripts: fns}); err != nil {
		panic(err)
	}
	if s.held, err = hold.New(client, hold.Options{Lib: lib, Now: s.now, PinScriptTime: s.pin, Scripts: fns,
		Queues: s.queues, Gates: s.gates}); err != nil {
		panic(err)
	}
	s.dead = deadletters.New(client, s, deadletters.Options{Now: s.now, PinScriptTime: s.pin, Scripts: fns})
	return s
}

// Scripts is the script layer of the Store's client (script.Attach in
// New): every store package made on the same client (outbox, jobs,
// deadletters, sfsub) is given it, before the client's first script
// command, so that its scripts join the client's one function library.
func (s *Store) Scripts() *script.Functions { return s.scripts }

// Ping checks that Redis answers. It returns ErrUnavailable when not.
func (s *Store) Ping(ctx context.Context) error {
	return s.wrap("ping", s.rdb.Ping(ctx).Err())
}

// Endpoints returns the names of every endpoint this store has created a
// callout for (the cp:endpoints set), unordered.
func (s *Store) Endpoints(ctx context.Context) ([]string, error) {
	v, err := s.rdb.SMembers(ctx, keyspace.Endpoints).Result()
	return v, s.wrap("endpoints", err)
}

// remember adds endpoint to cp:endpoints once per Store. The set is in its
// own slot, so it cannot join the create script; a failure is logged and
// retried on the next create.
func (s *Store) remember(ctx context.Context, endpoint string) {
	if _, ok := s.seen.Load(endpoint); ok {
		return
	}
	if err := s.rdb.SAdd(ctx, keyspace.Endpoints, endpoint).Err(); err != nil {
		s.log.Warn("redisstore: remember endpoint", "endpoint", endpoint, "err", err)
		return
	}
	s.seen.Store(endpoint, struct{}{})
}

// token returns 16 random bytes as base64url (22 characters): a lease or
// probe token.
func (s *Store) token() (string, error) {
	b, err := s.random("token")
	return base64.RawURLEncoding.EncodeToString(b), err
}

// newIDIn returns a fresh callout id of a queue in shard n: two hex
// digits of n and base64url of 16 random bytes (NewCalloutID).
func (s *Store) newIDIn(n int) (string, error) {
	b, err := s.random("callout id")
	return keyspace.IDOfRaw(n, string(b)), err
}

// random reads 16 bytes of Options.Rand for what (named in the error).
func (s *Store) random(what string) ([]byte, error) {
	b := make([]byte, 16)
	s.randMu.Lock()
	defer s.randMu.Unlock()
	if _, err := io.ReadFull(s.rand, b); err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", what, err)
	}
	return b, nil
}

// canNotify reports whether an owner notification about endpoint reaches
// anyone (Options.Notify): the scripts' A.can and A.notify.
func (s *Store) canNotify(endpoint string) bool {
	return s.notifies == nil || s.notifies(endpoint)
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }

// wrap turns a Redis error into the store's (script.Wrap): connection-level
// failures wrap ErrUnavailable. nil stays nil.
func (s *Store) wrap(op string, err error) error { return script.Wrap("redisstore: "+op, err) }

// clockArg is the now argument (A.now) of every script at now: 0, which
// makes the script read Redis's clock (lib.lua clock), or with
// Options.PinScriptTime now in Unix ms.
func (s *Store) clockArg(now time.Time) int64 {
	if s.pin {
		return now.UnixMilli()
	}
	return 0
}

// msUntil is the duration from now until t in ms, at least 0: how an
// instant the replica computed (a backoff's end, a pause's end) reaches a
// script, which adds it to Redis's now.
func msUntil(t, now time.Time) int64 { return max(0, t.Sub(now).Milliseconds()) }

// msArg formats a time as the Unix ms argument of a script.
func msArg(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func durMs(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// msOf is t in Unix ms, 0 for the zero time.
func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// msTimeOf is Unix ms n as a time, the zero time for 0.
func msTimeOf(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// CheckLayout is layout.Check on the store's Redis, remembered once it
// passes (Options.RequireLayout). Errors: a *layout.Error, ErrUnavailable.
func (s *Store) CheckLayout(ctx context.Context) error {
	if err := layout.Check(ctx, s.rdb); err != nil {
		return err
	}
	s.layoutOK.Store(true)
	return nil
}

// layoutReady is the guard of Options.RequireLayout: nil once the layout
// has been confirmed (or when not required), else CheckLayout's answer.
func (s *Store) layoutReady(ctx context.Context) error {
	if !s.requireLayout || s.layoutOK.Load() {
		return nil
	}
	return s.CheckLayout(ctx)
}

// queue is one queue of an endpoint (keyspace.Queue: its keys, built by
// keyspace.QueueAt and ForOrg).
type queue = keyspace.Queue
