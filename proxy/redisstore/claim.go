package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/fair"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/queues"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// ClaimOptions, ClaimRequest and ClaimResult are the domain's claim types
// (policy), so that the dispatcher's Store interface names no type of this
// package.
type (
	ClaimOptions = policy.ClaimOptions
	ClaimRequest = policy.ClaimRequest
	ClaimResult  = policy.ClaimResult
)

// Claim leases up to opts.Batch due callouts of endpoint to the caller:
// ClaimBatch for one endpoint. Errors: ErrUnavailable.
func (s *Store) Claim(ctx context.Context, endpoint string, opts ClaimOptions) (ClaimResult, error) {
	r, err := s.ClaimBatch(ctx, []ClaimRequest{{Endpoint: endpoint, ClaimOptions: opts}}, 0)
	if err != nil {
		return ClaimResult{}, err
	}
	return r[0], nil
}

// ClaimBatch leases due callouts of several endpoints at once
// (docs/performance.md "The dispatcher"): up to each request's Batch (the
// caller sizes it to the endpoint's free slots) and at most total in all
// (≤ 0: no such bound). When the due callouts are more than total, the
// slots go one at a time to the requests in their order (the caller's
// fairness rule), skipping those with nothing more due. Two round trips
// whatever the number of endpoints: the candidates pipeline, then one
// claim.lua run per Redis Cluster slot with candidates, pipelined. The
// attempt is counted at claim time (Claimed.Attempt). Results are in
// request order. Errors: ErrUnavailable.
func (s *Store) ClaimBatch(ctx context.Context, reqs []ClaimRequest, total int) ([]ClaimResult, error) {
	if err := s.layoutReady(ctx); err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if r.Lease <= 0 {
			return nil, fmt.Errorf("redisstore: claim: lease must be > 0")
		}
	}
	now := s.now()
	plans, grew, err := s.candidates(ctx, reqs, now)
	if err == nil && grew {
		// A queue's counters named an organisation this replica did not
		// know: read again with its queue, so its first callouts wait no
		// round.
		plans, _, err = s.candidates(ctx, reqs, now)
	}
	if err != nil {
		return nil, err
	}
	allot(plans, reqs, total)
	out := make([]ClaimResult, len(reqs))
	for i, p := range plans {
		out[i] = ClaimResult{Gate: policy.Gate{State: policy.GateOpen}, NextDueAt: p.nextDue, LeaseExpiresAt: p.nextLease}
	}
	err = s.claimPlans(ctx, reqs, plans, out, now)
	return out, err
}

// queuePlan is what the candidates pipeline found in one queue.
type queuePlan struct {
	q      queue
	ids    []string // due candidates: up to twice cap, the rest spares
	seen   int      // due candidates read
	leased int      // callouts of the queue in flight (every replica's)
	cap    int      // the most to claim of them (its share of the batch)
	view   gateview.View
	given  bool              // a sharded queue: the gate comes from view
	tokens map[string]string // id -> the lease token it is claimed with
	shut   bool              // its breaker partition was found shut
}

// endpointPlan is one request's candidates.
type endpointPlan struct {
	queues    []*queuePlan
	nextDue   time.Time
	nextLease time.Time
	want      int        // due candidates it may claim (its batch)
	dueSeen   int        // due candidates read, spares included
	shutSeen  int        // of them, in queues whose breaker partition was shut
	room      *fair.Room // what each organisation (issuer tag) may take (fair.RoomFor; nil: no cap)
	capped    int        // due candidates left out by room
	rot       int        // where ties between organisations start (rotates)
}

// candidates reads every organisation queue's first waiting ids (ZRANGE
// … WITHSCORES), earliest lease and number in flight, the stale gate
// views and the queues' counters (which organisations have pending
// callouts, queues.OrgsOfCounters), in one pipeline. grew reports an organisation
// queue this replica did not know of (ClaimBatch then reads again). Queues whose breaker partition a claim
// found shut are skipped until it may open (gateview.Views.Skipped).
func (s *Store) candidates(ctx context.Context, reqs []ClaimRequest, now time.Time) (plans []*endpointPlan, grew bool, err error) {
	type read struct {
		due, lease *redis.ZSliceCmd
		leased     *redis.IntCmd
	}
	plans = make([]*endpointPlan, len(reqs))
	reads := make([][]read, len(reqs))
	regs := make([][]*redis.MapStringStringCmd, len(reqs))
	bases := make([][]queue, len(reqs))
	views := map[string]*gateview.Pending{} // keyspace.PartitionGate(endpoint, partition)
	for i, r := range reqs {
		if bases[i], err = s.queues.Of(ctx, r.Endpoint); err != nil {
			return nil, false, err
		}
		qs, err := s.queues.Orgs(ctx, r.Endpoint, false)
		if err != nil {
			return nil, false, err
		}
		plans[i] = &endpointPlan{rot: s.queues.Rotation(r.Endpoint)}
		for _, q := range qs {
			if until := s.gates.Skipped(r.Endpoint, q.Part, now); !until.IsZero() {
				earliest(&plans[i].nextDue, until)
				continue
			}
			plans[i].queues = append(plans[i].queues, &queuePlan{q: q, given: !q.Home})
		}
	}
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range reqs {
			// Twice the batch from each queue (docs/performance.md "Spare
			// candidates"): claim.lua stops at cap.
			spares := int64(min(2*max(r.Batch, 1), maxBatch))
			for _, qp := range plans[i].queues {
				reads[i] = append(reads[i], read{p.ZRangeWithScores(ctx, qp.q.Due, 0, spares-1),
					p.ZRangeWithScores(ctx, qp.q.Lease, 0, 0), p.ZCard(ctx, qp.q.Lease)})
				vk := keyspace.PartitionGate(r.Endpoint, qp.q.Part)
				if _, fresh := s.gates.Fresh(r.Endpoint, qp.q.Part); qp.given && views[vk] == nil && !fresh {
					views[vk] = s.gates.Queue(ctx, p, r.Endpoint, qp.q.Part)
				}
			}
			for _, q := range bases[i] {
				regs[i] = append(regs[i], p.HGetAll(ctx, q.Counters))
			}
		}
		return nil
	})
	for i := range reqs {
		for _, r := range reads[i] {
			for _, c := range []redis.Cmder{r.due, r.lease, r.leased} {
				if err := c.Err(); err != nil && !isNil(err) {
					return nil, false, s.wrap("claim", err)
				}
			}
		}
		got := map[int][]string{}
		for j, c := range regs[i] {
			if err := c.Err(); err != nil && !isNil(err) {
				return nil, false, s.wrap("claim", err)
			}
			got[bases[i][j].Shard] = queues.OrgsOfCounters(c.Val())
		}
		grew = s.queues.SetOrgs(reqs[i].Endpoint, got) || grew
	}
	for vk, c := range views {
		v, err := c.Result(ctx)
		if err != nil {
			return nil, false, err
		}
		ep, part := keyspace.SplitGate(vk)
		s.gates.Keep(ep, part, v)
	}
	nowMs := float64(now.UnixMilli())
	for i, r := range reqs {
		p := plans[i]
		note := func(z []redis.Z, lease bool) (due []string) {
			for _, m := range z {
				at := time.UnixMilli(int64(m.Score))
				switch {
				case lease:
					earliest(&p.nextLease, at)
				case m.Score <= nowMs:
					due = append(due, m.Member.(string))
				default:
					earliest(&p.nextDue, at)
				}
			}
			return due
		}
		for j, qp := range p.queues {
			qp.ids = note(reads[i][j].due.Val(), false)
			qp.seen, qp.leased = len(qp.ids), int(reads[i][j].leased.Val())
			note(reads[i][j].lease.Val(), true)
			if qp.given {
				qp.view, _, _ = s.gateOf(ctx, qp.q) // fresh: read above or recently
			}
		}
		p.dueSeen = p.dueIn()
		p.room, p.capped = fair.RoomFor(p.fairQueues(), r.OrgCap, issuerTags(r.OrgInFlight))
		p.want = min(max(r.Batch, 1), maxBatch, p.dueSeen-p.capped)
	}
	return plans, grew, nil
}

// earliest sets *t to at when *t is zero (not known yet) or later.
func earliest(t *time.Time, at time.Time) {
	if t.IsZero() || at.Before(*t) {
		*t = at
	}
}

// dueIn counts the due candidates of the plan's queues.
func (p *endpointPlan) dueIn() int {
	n := 0
	for _, qp := range p.queues {
		n += len(qp.ids)
	}
	return n
}

// allot gives each plan its share of total (≤ 0: each its want), one slot
// at a time in request order among the plans that want more (fair.Shares),
// and cuts the candidates to it (spread).
func allot(plans []*endpointPlan, reqs []ClaimRequest, total int) {
	wants := make([]int, len(plans))
	for i, p := range plans {
		wants[i] = p.want
	}
	for i, share := range fair.Shares(wants, total) {
		spread(plans[i], share)
	}
}

// spread shares an endpoint's batch among its queues fairly across
// organisations (fair.Spread, contract §10 "Fair dispatch") and sets each
// queue's cap, with as many spare candidates again kept behind it.
func spread(p *endpointPlan, batch int) {
	for j, take := range fair.Spread(p.fairQueues(), batch, p.rot, p.room) {
		qp := p.queues[j]
		qp.cap = take
		qp.ids = qp.ids[:min(len(qp.ids), 2*take)]
	}
}

// fairQueues are the plan's queues as package fair reads them.
func (p *endpointPlan) fairQueues() []fair.Queue {
	qs := make([]fair.Queue, len(p.queues))
	for j, qp := range p.queues {
		qs[j] = fair.Queue{Org: qp.q.Org, Leased: qp.leased, Due: len(qp.ids)}
	}
	return qs
}

// issuerTags is counts by issuer, keyed by issuer tag (keyspace.IssuerTag).
func issuerTags(counts map[string]int) map[string]int {
	if len(counts) == 0 {
		return nil
	}
	out := make(map[string]int, len(counts))
	for iss, n := range counts {
		out[keyspace.IssuerTag(iss)] += n
	}
	return out
}

// claimPlans runs the claim scripts of the plans, one per slot, in one
// pipeline, and fills out.
func (s *Store) claimPlans(ctx context.Context, reqs []ClaimRequest, plans []*endpointPlan, out []ClaimResult, now time.Time) error {
	base, err := s.token()
	if err != nil {
		return err
	}
	cluster := s.isCluster()
	groups := map[int]*claimArgs{} // by slot (one group, slot 0, on a single node)
	type member struct {
		i  int
		qp *queuePlan
	}
	members := map[*claimArgs][]member{}
	var order []*claimArgs
	n := 0
	nextToken := func() string {
		t := base + "." + strconv.Itoa(n)
		n++
		return t
	}
	for i, r := range reqs {
		p := plans[i]
		br := r.Breaker.WithDefaults(r.Lease)
		// homeDue: breaker partitions whose probe a home-slot queue with
		// candidates takes itself ("*": any partition's queue, for the
		// endpoint's own breaker).
		homeDue := map[string]bool{}
		for _, qp := range p.queues {
			if qp.q.Home && len(qp.ids) > 0 {
				homeDue[qp.q.Part], homeDue["*"] = true, true
			}
		}
		for _, qp := range p.queues {
			if len(qp.ids) == 0 {
				continue
			}
			qp.tokens = map[string]string{}
			if qp.given {
				ok, err := s.sharedGate(ctx, qp, out, i, homeDue, br.ProbeLease)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				if qp.view.Gate.State == "probe" {
					homeDue[qp.view.Level], homeDue["*"] = true, true
				}
			}
			slot := 0
			if cluster {
				slot = keyspace.Slot(qp.q.Due)
			}
			c := groups[slot]
			if c == nil {
				c = &claimArgs{Now: s.clockArg(now)}
				groups[slot] = c
				order = append(order, c)
			}
			cq := claimQueue{Due: qp.q.Due, Lease: qp.q.Lease, Counters: qp.q.Counters, Count: len(qp.ids),
				LeaseMs: r.Lease.Milliseconds(), ProbeLease: br.ProbeLease.Milliseconds(), Want: qp.cap, Part: qp.q.Part}
			cq.Gate, cq.GateUntil = qp.view.Args(qp.given)
			c.Queues = append(c.Queues, cq)
			for _, id := range qp.ids {
				cc, rest, _ := qp.q.Record(id)
				tok := qp.tokens[id]
				if tok == "" {
					tok = nextToken()
					qp.tokens[id] = tok
				}
				c.Candidates = append(c.Candidates, claimCandidate{Record: cc, Rest: rest, ID: id, Token: tok})
			}
			members[c] = append(members[c], member{i, qp})
		}
	}
	calls := make([]*script.Call[claimArgs, claimReply], len(order))
	if len(order) > 0 {
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k, c := range order {
				calls[k] = s.lua.claim.Queue(ctx, p, c)
			}
			return nil
		})
	}
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for k, c := range order {
		v, err := calls[k].Result(ctx, s.rdb)
		if err != nil {
			keep(s.wrap("claim", err))
			continue
		}
		if len(v.Queues) != len(members[c]) {
			keep(fmt.Errorf("redisstore: claim: %d queue replies for %d queues", len(v.Queues), len(members[c])))
			continue
		}
		byQueue := make([][]claimedOne, len(members[c]))
		for _, cl := range v.Claimed {
			if cl.Queue < 1 || cl.Queue > len(byQueue) {
				keep(fmt.Errorf("redisstore: claim: a callout of queue %d of %d", cl.Queue, len(byQueue)))
				continue
			}
			byQueue[cl.Queue-1] = append(byQueue[cl.Queue-1], cl)
		}
		for q, m := range members[c] {
			keep(s.decodeQueueClaim(ctx, m.qp, v.Queues[q], byQueue[q], &out[m.i], reqs[m.i], now))
		}
	}
	for i := range reqs {
		for _, qp := range plans[i].queues {
			if qp.shut {
				plans[i].shutSeen += qp.seen
			}
		}
		out[i].MoreDue = plans[i].dueSeen-plans[i].shutSeen-plans[i].capped > len(out[i].Claimed)
	}
	return firstErr
}

// sharedGate decides whether a queue of a sharded endpoint (not its home
// queue) is claimed this round, from the gate this replica viewed: a shut
// gate claims nothing (a disabled one drains the candidates); a half-open
// one probes only when no home-slot queue has candidates (the home queue
// takes the probe token itself, atomically), by taking the token on the
// endpoint hash first (gateview.Views.TakeProbe) and claiming one candidate with it.
func (s *Store) sharedGate(ctx context.Context, qp *queuePlan, out []ClaimResult, i int, homeDue map[string]bool, probeLease time.Duration) (bool, error) {
	switch st := qp.view.Gate.State; {
	case st == policy.GateOpen:
		return true, nil
	case st == policy.GateHalfOpen:
		if (qp.view.Level == "" && homeDue["*"]) || (qp.view.Level != "" && homeDue[qp.view.Level]) {
			return false, nil
		}
		tok, err := s.token()
		if err != nil {
			return false, err
		}
		v, err := s.gates.TakeProbe(ctx, qp.q.Endpoint, qp.q.Part, tok, probeLease)
		if err != nil {
			return false, err
		}
		qp.view = v
		if v.Gate.State != "probe" {
			s.noteGate(qp, &out[i], v.Gate, v.Level)
			return v.Gate.State == policy.GateOpen, nil
		}
		qp.ids, qp.cap = qp.ids[:1], 1
		qp.tokens[qp.ids[0]] = tok
		return true, nil
	case st == policy.GateDisabled:
		mergeGate(&out[i], qp.view.Gate)
		moved, err := s.drain(ctx, qp.q, qp.ids, string(policy.GateDisabled))
		out[i].DeadLettered = append(out[i].DeadLettered, moved...)
		return false, err
	default:
		s.noteGate(qp, &out[i], qp.view.Gate, qp.view.Level)
		return false, nil
	}
}

// noteGate takes in the gate a queue's claim saw: the endpoint's own
// (level "") is the endpoint's gate (mergeGate); a shut breaker partition
// (level: its issuer tag) holds that organisation's queues only — they are
// skipped until it may open (gateview.Views.Skip), that time is when to look
// again (NextDueAt), and their due callouts are no reason for another
// round now (MoreDue).
func (s *Store) noteGate(qp *queuePlan, res *ClaimResult, g policy.Gate, level string) {
	if level == "" || !g.Shut() {
		mergeGate(res, g)
		return
	}
	until := s.gates.Skip(qp.q.Endpoint, level, g.Until)
	earliest(&res.NextDueAt, until)
	qp.shut = true
}

// mergeGate reports g as the endpoint's gate unless a shut or disabled
// one was already reported.
func mergeGate(res *ClaimResult, g policy.Gate) {
	if g.State == "probe" {
		g.State = policy.GateHalfOpen
	}
	if g.Shut() || g.State == policy.GateDisabled || res.Gate.State == policy.GateOpen {
		res.Gate = g
	}
}

// claimArgs are claim.lua's keys and arguments: now (ms, lib.lua clock),
// the queues of one slot and their candidates, in queue order.
type claimArgs struct {
	Now        int64            `lua:"now"`
	Queues     []claimQueue     `lua:"queues"`
	Candidates []claimCandidate `lua:"candidates"`
}

// claimQueue is one queue of a claim: its due, lease and counters keys
// (counters: the endpoint hash or the queue's counter hash), Count of its
// candidates, the gate the caller read ("": the script reads counters'),
// LeaseMs and ProbeLease (ms), Want (the most to claim: the candidates past
// it are spares, for those another replica claimed first) and Part (the
// breaker partition its callouts meet and test, "" the endpoint's, so a
// half-open partition's probe is one of its own callouts, contract §6).
type claimQueue struct {
	Due        string `lua:"due,key"`
	Lease      string `lua:"lease,key"`
	Counters   string `lua:"counters,key"`
	Count      int    `lua:"count"`
	Gate       string `lua:"gate"`
	GateUntil  string `lua:"gate_until"`
	LeaseMs    int64  `lua:"lease_ms"`
	ProbeLease int64  `lua:"probe_lease"`
	Want       int    `lua:"want"`
	Part       string `lua:"part"`
}

// claimCandidate is one due callout a claim re-checks: its record and :q
// keys, its id and the lease token it is claimed with.
type claimCandidate struct {
	Record string `lua:"record,key"`
	Rest   string `lua:"rest,key"`
	ID     string `lua:"id"`
	Token  string `lua:"token"`
}

// claimReply is claim.lua's reply.
type claimReply struct {
	Queues  []claimedQueue `lua:"queues"`
	Claimed []claimedOne   `lua:"claimed"`
}

// claimedQueue is the gate one queue's claim saw.
type claimedQueue struct {
	Gate      string `lua:"gate"`
	GateUntil int64  `lua:"gate_until"`
	Level     string `lua:"level"`
}

// claimedOne is one claimed callout: its record as it was before the claim
// (field, value, …), its :q when it has one.
type claimedOne struct {
	Queue    int      `lua:"queue"`
	ID       string   `lua:"id"`
	Kind     string   `lua:"kind"`
	Attempts int      `lua:"attempts"`
	First    int64    `lua:"first"`
	Due      float64  `lua:"due"`
	Rest     string   `lua:"rest"`
	Record   []string `lua:"record"`
	Token    string   `lua:"token"` // its lease token
}

// decodeQueueClaim decodes one queue's part of a claim.lua reply: the gate
// it saw and the callouts it claimed.
func (s *Store) decodeQueueClaim(ctx context.Context, qp *queuePlan, gq claimedQueue, claimed []claimedOne, res *ClaimResult, r ClaimRequest, now time.Time) error {
	g := policy.Gate{State: policy.GateState(gq.Gate), Until: msTimeOf(gq.GateUntil)}
	s.noteGate(qp, res, g, gq.Level)
	if g.State == policy.GateDisabled {
		gs, _ := qp.view.Args(qp.given)
		moved, err := s.drain(ctx, qp.q, qp.ids, gs)
		res.DeadLettered = append(res.DeadLettered, moved...)
		return err
	}
	for _, x := range claimed {
		c, err := s.decodeClaimed(ctx, x, now, now.Add(r.Lease))
		if err != nil {
			return err
		}
		c.LeaseToken = qp.tokens[c.ID]
		res.Claimed = append(res.Claimed, c)
	}
	return nil
}

// decodeClaimed decodes one claimed callout of claim.lua.
func (s *Store) decodeClaimed(ctx context.Context, r claimedOne, now, leaseUntil time.Time) (*policy.Claimed, error) {
	if len(r.Record)%2 != 0 {
		return nil, fmt.Errorf("redisstore: claim: a record of %d values", len(r.Record))
	}
	m := make(map[string]string, len(r.Record)/2)
	for i := 0; i+1 < len(r.Record); i += 2 {
		m[r.Record[i]] = r.Record[i+1]
	}
	c, err := record.Decode(r.ID, m, r.Rest, func(tag string) string { return s.issuers.Of(ctx, tag) })
	if err != nil {
		return nil, err
	}
	return &policy.Claimed{
		ID: r.ID, NewCallout: c.Request(), Attempt: r.Attempts, Kind: policy.Kind(r.Kind),
		LeaseExpiresAt: msTime(leaseUntil), StartedAt: msTime(now), DueAt: time.UnixMilli(int64(r.Due)),
		FirstAttemptAt: msTimeOf(r.First), CreatedAt: c.CreatedAt,
	}, nil
}

// dueBy is the ZRANGEBYSCORE range of up to n members scored at or before t.
func dueBy(t time.Time, n int) *redis.ZRangeBy {
	return &redis.ZRangeBy{Min: "-inf", Max: msArg(t), Count: int64(n)}
}

// isCluster reports whether the store runs on a Redis Cluster, where one
// script may touch one slot only.
func (s *Store) isCluster() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}
