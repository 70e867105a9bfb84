// Package gateview reads an endpoint's gate (contract §6: disabled, paused,
// breaker open, probing, half-open or open) exactly as the store's Lua
// computes it — lib.lua gate_of, through gate_read.lua and admit.lua, never
// derived in Go — and keeps this replica's views of it for the scripts
// that cannot read it themselves.
//
// Sharded endpoints (keyspace "Shards and queues"): an endpoint configured
// with shards: N spreads its callouts over N queues, each under its own
// hash tag, so a Redis Cluster spreads one endpoint's load over several
// primaries. The endpoint hash (breaker, gate, pause, disable, outage)
// stays one, in queue 0's slot. A script runs in one slot, so the scripts
// of queues 1 … N-1 cannot read the gate: they act on the View this
// replica last read (Of, at most TTL old), and the breaker update of their
// attempts runs on the endpoint hash in the same pipeline (outcome.lua).
// Views also remember, for claims, the breaker partitions a claim found
// shut (Skip), as the dispatcher skips a shut endpoint.
//
// The store's core (proxy/redisstore) owns one Views and tells it of its
// own gate changes (Forget); the gate cache of reads
// (proxy/redisstore/gatecache) keeps the replies of the core's Admit and
// ReadGates, which read through here. It imports only policy, keyspace
// and script; the core hands it its Lua library (Options.Lib).
package gateview

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// TTL is the longest a replica acts on an endpoint gate it read for a
// queue of a sharded endpoint (creating, claiming, completing and reaping
// callouts of queues 1 … N-1) before reading it again. A breaker that
// opens, a pause, or a disable reaches those queues within it; the probe
// token itself is always taken on the endpoint hash (admit.lua), so there
// is still exactly one probe.
const TTL = 100 * time.Millisecond

// SkipRecheck is the longest a claim skips the queues of a breaker
// partition it found shut before reading them again, as the dispatcher
// trusts a shut endpoint gate (dispatch.GateRecheck): an admin's reset
// takes effect within it.
const SkipRecheck = time.Second

//go:embed lua/*.lua
var luaFS embed.FS

// Options configures Views. Lib is required.
type Options struct {
	// Lib is the store's Lua library (proxy/redisstore lua/lib.lua: gate_of
	// and its helpers), prepended to each script after script.Clock.
	Lib string
	// Now is the replica's clock (the store's): a view's age is measured
	// with it. Default time.Now.
	Now func() time.Time
	// PinScriptTime makes the scripts take Now() as their now instead of
	// Redis's TIME (the store's Options.PinScriptTime: tests only).
	PinScriptTime bool
	// Scripts is the script layer of the client (the store's
	// redisstore.Store.Scripts, made by script.Attach): the package's
	// scripts join its one function library. nil: a script.Functions of
	// the package's own on the client (a library of its own).
	Scripts *script.Functions
}

// View is an endpoint's gate as lib.lua gate_of computed it for one
// breaker partition.
type View struct {
	// Gate is the gate met: its state ("probe" from Admit when the caller
	// took the probe token) and when it may open (zero: not known).
	Gate policy.Gate
	// Failures is the consecutive failure count, the endpoint's or the
	// partition's when it has more (a success must be recorded while
	// either is not 0).
	Failures int
	// Level is the breaker partition whose gate it is (an issuer tag; ""
	// the endpoint's own).
	Level string
	// LastSuccess is the endpoint's last recorded success (lsu, kept
	// within half a probe interval: lib.lua breaker_apply); zero when none
	// or not read (Admit).
	LastSuccess time.Time
}

// Args are the gate arguments of a queue's script (A.gate, A.gate_until):
// "", "" when given is false (the home queue, whose scripts read the gate
// themselves), else the viewed state and its until in Unix ms.
func (v View) Args(given bool) (string, string) {
	if !given {
		return "", ""
	}
	return string(v.Gate.State), msString(v.Gate.Until)
}

// Partition is one breaker partition with a breaker of its own in the
// endpoint hash (State with list).
type Partition struct {
	Tag      string `lua:"tag"`
	Breaker  string `lua:"breaker"`
	Failures int    `lua:"failures"`
	OpenedAt int64  `lua:"opened_at"` // Unix ms, 0: none
	ProbeAt  int64  `lua:"probe_at"`  // Unix ms, 0: none
}

// Views reads gates and keeps this replica's views of them. It is safe for
// concurrent use.
type Views struct {
	rdb      redis.UniversalClient
	now      func() time.Time
	pin      bool
	read     *script.Script[readArgs, readReply]
	admit    *script.Script[admitArgs, admitReply]
	mu       sync.Mutex
	views    map[string]map[string]viewAt // endpoint -> breaker partition -> view
	skipping map[string]time.Time         // keyspace.PartitionGate(endpoint, part) -> until when claims skip it
}

// viewAt is a view and when it was read.
type viewAt struct {
	v  View
	at time.Time
}

// New returns Views on client. Errors: a script that does not load (a
// build defect: the scripts are embedded).
func New(client redis.UniversalClient, o Options) (*Views, error) {
	v := &Views{rdb: client, now: o.Now, pin: o.PinScriptTime, views: map[string]map[string]viewAt{}, skipping: map[string]time.Time{}}
	if v.now == nil {
		v.now = time.Now
	}
	if o.Scripts == nil {
		o.Scripts = script.Attach(client, nil)
	}
	p := script.Package{FS: luaFS, Prelude: []string{script.Clock, o.Lib}, Functions: o.Scripts}
	err := errors.Join(script.LoadInto(&v.read, p, "gate_read"), script.LoadInto(&v.admit, p, "admit"))
	if err != nil {
		return nil, fmt.Errorf("gateview: %w", err)
	}
	return v, nil
}

// Read reads the gate of endpoint's breaker partition part ("" the
// endpoint's own) now (gate_read.lua), without keeping it. Errors:
// ErrUnavailable.
func (g *Views) Read(ctx context.Context, endpoint, part string) (View, error) {
	r, err := g.read.Run(ctx, g.rdb, g.readArgs(endpoint, part, false))
	return r.view(), wrap(err)
}

// State reads the gate of endpoint's own breaker and every breaker
// partition's state (gate_read.lua with its list): the gate, the
// endpoint's own breaker (closed, open, half_open) and the partitions in
// tag order. Errors: ErrUnavailable.
func (g *Views) State(ctx context.Context, endpoint string) (View, string, []Partition, error) {
	r, err := g.read.Run(ctx, g.rdb, g.readArgs(endpoint, "", true))
	return r.view(), r.Breaker, r.Partitions, wrap(err)
}

// Pending is a gate read queued in a pipeline (Queue).
type Pending struct {
	c   *script.Call[readArgs, readReply]
	rdb redis.UniversalClient
}

// Queue queues Read in p; its Result is read once p has run.
func (g *Views) Queue(ctx context.Context, p redis.Pipeliner, endpoint, part string) *Pending {
	return &Pending{g.read.Queue(ctx, p, g.readArgs(endpoint, part, false)), g.rdb}
}

// Result is the queued read's view (after a NOSCRIPT, the read runs again
// by EVAL). Errors: ErrUnavailable, a reply the code does not understand.
func (p *Pending) Result(ctx context.Context) (View, error) {
	r, err := p.c.Result(ctx, p.rdb)
	return r.view(), wrap(err)
}

// Admit checks the gate of endpoint's breaker partition part and, when it
// is half-open and its probe token free, takes the token as token for
// lease (admit.lua, on the endpoint hash, contract §6: "the first request
// or held callout that takes the single probe token"): the view's state
// is then "probe". It keeps nothing (TakeProbe does). Errors:
// ErrUnavailable.
func (g *Views) Admit(ctx context.Context, endpoint, part, token string, lease time.Duration) (View, error) {
	a, err := g.admit.Run(ctx, g.rdb, &admitArgs{Endpoint: keyspace.Endpoint(endpoint), Now: g.clockArg(),
		Token: token, ProbeLease: lease.Milliseconds(), Part: part})
	if err != nil {
		return View{}, script.Wrap("redisstore: admit", err)
	}
	return View{Gate: policy.Gate{State: policy.GateState(a.Gate), Until: timeOf(a.GateUntil)}, Failures: a.Failures,
		Level: a.Level}, nil
}

// TakeProbe is Admit for a callout of a sharded queue, which keeps the view
// it learnt: probing until the lease ends when this caller took the token,
// else the gate it found (probing, open, breaker_open, …).
func (g *Views) TakeProbe(ctx context.Context, endpoint, part, token string, lease time.Duration) (View, error) {
	until := g.now().Add(lease)
	v, err := g.Admit(ctx, endpoint, part, token, lease)
	if err != nil {
		return View{}, err
	}
	kept := v
	if v.Gate.State == "probe" {
		kept.Gate = policy.Gate{State: policy.GateProbing, Until: until}
	}
	g.Keep(endpoint, part, kept)
	return v, nil
}

// Of returns the view of endpoint's breaker partition part: the one this
// replica read at most TTL ago, else a new reading, kept. Errors:
// ErrUnavailable.
func (g *Views) Of(ctx context.Context, endpoint, part string) (View, error) {
	if v, ok := g.Fresh(endpoint, part); ok {
		return v, nil
	}
	v, err := g.Read(ctx, endpoint, part)
	if err != nil {
		return View{}, err
	}
	g.Keep(endpoint, part, v)
	return v, nil
}

// Fresh returns the view of endpoint's breaker partition part when this
// replica read it less than TTL ago.
func (g *Views) Fresh(endpoint, part string) (View, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	va, ok := g.views[endpoint][part]
	return va.v, ok && g.now().Sub(va.at) < TTL
}

// Keep records v as the gate of endpoint's breaker partition part, read
// now.
func (g *Views) Keep(endpoint, part string, v View) {
	g.mu.Lock()
	if g.views[endpoint] == nil {
		g.views[endpoint] = map[string]viewAt{}
	}
	g.views[endpoint][part] = viewAt{v, g.now()}
	g.mu.Unlock()
}

// Forget drops every view of endpoint (its own and its partitions') after
// this replica changed the endpoint hash itself (a breaker transition,
// pause, probe, reset, disable).
func (g *Views) Forget(endpoint string) {
	g.mu.Lock()
	delete(g.views, endpoint)
	g.mu.Unlock()
}

// Skip records that a claim found the gate of endpoint's breaker
// partition part (an issuer tag, never "") shut until until (zero: not
// known): claims skip its queues until then, at most SkipRecheck from now.
// It returns the time they skip it until.
func (g *Views) Skip(endpoint, part string, until time.Time) time.Time {
	limit := g.now().Add(SkipRecheck)
	if until.IsZero() || limit.Before(until) {
		until = limit
	}
	g.mu.Lock()
	g.skipping[keyspace.PartitionGate(endpoint, part)] = until
	g.mu.Unlock()
	return until
}

// Skipped is until when claims skip the queues of endpoint's breaker
// partition part at now (Skip; zero: not skipped, and never the
// endpoint's own, "").
func (g *Views) Skipped(endpoint, part string, now time.Time) time.Time {
	if part == "" {
		return time.Time{}
	}
	k := keyspace.PartitionGate(endpoint, part)
	g.mu.Lock()
	defer g.mu.Unlock()
	if u := g.skipping[k]; now.Before(u) {
		return u
	}
	delete(g.skipping, k)
	return time.Time{}
}

// readArgs are gate_read.lua's keys and arguments (lua/gate_read.lua).
type readArgs struct {
	Endpoint string `lua:"endpoint,key"`
	Now      int64  `lua:"now"`
	Part     string `lua:"part"`
	List     bool   `lua:"list"`
}

// readReply is gate_read.lua's reply.
type readReply struct {
	Gate       string      `lua:"gate"`
	GateUntil  int64       `lua:"gate_until"`
	Level      string      `lua:"level"`
	Breaker    string      `lua:"breaker"`
	Failures   int         `lua:"failures"`
	LastOK     int64       `lua:"last_success"`
	Partitions []Partition `lua:"partitions"` // with List
}

func (r readReply) view() View {
	return View{Gate: policy.Gate{State: policy.GateState(r.Gate), Until: timeOf(r.GateUntil)}, Failures: r.Failures,
		Level: r.Level, LastSuccess: timeOf(r.LastOK)}
}

// admitArgs are admit.lua's keys and arguments (lua/admit.lua).
type admitArgs struct {
	Endpoint   string `lua:"endpoint,key"`
	Now        int64  `lua:"now"`
	Token      string `lua:"token"`
	ProbeLease int64  `lua:"probe_lease"`
	Part       string `lua:"part"`
}

// admitReply is admit.lua's reply.
type admitReply struct {
	Gate      string `lua:"gate"`
	GateUntil int64  `lua:"gate_until"`
	Failures  int    `lua:"failures"`
	Level     string `lua:"level"`
}

func (g *Views) readArgs(endpoint, part string, list bool) *readArgs {
	return &readArgs{Endpoint: keyspace.Endpoint(endpoint), Now: g.clockArg(), Part: part, List: list}
}

// clockArg is A.now: 0 (the script reads TIME), or with PinScriptTime Now
// in Unix ms.
func (g *Views) clockArg() int64 {
	if g.pin {
		return g.now().UnixMilli()
	}
	return 0
}

func wrap(err error) error { return script.Wrap("redisstore: gate_read", err) }

// timeOf is Unix ms n as a time, the zero time for 0.
func timeOf(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// msString is t in Unix ms in decimal, "0" for the zero time.
func msString(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}
