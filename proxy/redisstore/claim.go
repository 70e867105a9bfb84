package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
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

// ClaimBatch leases due callouts of several endpoints at once (ARCHITECTURE.md
// "Redis data model": one script call claims up to N callouts
// across due endpoints): up to each request's Batch, which the caller
// sizes to each endpoint's free slots, and at most total in all (≤ 0: no
// such bound), the caller's free slots. When the due callouts are more
// than total, the slots go one at a time to the requests in their order,
// skipping those with nothing more due: the caller orders them by its
// fairness rule (fairness and max_concurrency are the dispatcher's).
// Two round trips whatever the number of endpoints: one
// pipeline reads every queue's first waiting ids and earliest lease (and
// the gate of sharded endpoints whose view is stale), then one claim.lua
// run per Redis Cluster slot that has candidates (on a single node, one in
// all) re-checks each candidate and the gate in O(1) and leases them,
// pipelined. Records of the legacy layout (keys.go) are claimed by
// legacy_claim.lua in the same pipeline. The attempt is counted at claim
// time (Claimed.Attempt). Results are in request order. Errors:
// ErrUnavailable.
func (s *Store) ClaimBatch(ctx context.Context, reqs []ClaimRequest, total int) ([]ClaimResult, error) {
	for _, r := range reqs {
		if r.Lease <= 0 {
			return nil, fmt.Errorf("redisstore: claim: lease must be > 0")
		}
	}
	now := s.now()
	plans, err := s.candidates(ctx, reqs, now)
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
	cap    int      // the most to claim of them (its share of the batch)
	view   gateView
	given  bool              // a sharded queue: the gate comes from view
	tokens map[string]string // id -> the lease token it is claimed with
}

// endpointPlan is one request's candidates.
type endpointPlan struct {
	queues    []*queuePlan
	legacy    []string // due candidates in the legacy due set
	nextDue   time.Time
	nextLease time.Time
	legacyAll bool // the legacy due and lease sets are both empty
	want      int  // due candidates it may claim (its batch)
	dueSeen   int  // due candidates read, spares included
}

// candidates reads every queue's first waiting ids (ZRANGE … WITHSCORES)
// and earliest lease, and the stale gate views, in one pipeline.
func (s *Store) candidates(ctx context.Context, reqs []ClaimRequest, now time.Time) ([]*endpointPlan, error) {
	type read struct {
		due, lease *redis.ZSliceCmd
	}
	plans := make([]*endpointPlan, len(reqs))
	reads := make([][]read, len(reqs))
	legacy := make([]read, len(reqs))
	views := map[string]*scriptCall{}
	for i, r := range reqs {
		qs, err := s.queuesOf(ctx, r.Endpoint)
		if err != nil {
			return nil, err
		}
		plans[i] = &endpointPlan{}
		for _, q := range qs {
			plans[i].queues = append(plans[i].queues, &queuePlan{q: q, given: !q.home})
		}
	}
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range reqs {
			batch := int64(min(max(r.Batch, 1), maxBatch))
			// Twice the batch from each queue: another replica reading the
			// same first ids at the same time claims some of them first; the
			// spares let this claim still fill its batch (claim.lua stops at
			// cap), instead of a short claim and another round.
			spares := int64(min(2*max(r.Batch, 1), maxBatch))
			lk := keysOf(r.Endpoint)
			if s.legacyDue(r.Endpoint, now) {
				legacy[i] = read{p.ZRangeWithScores(ctx, lk.due, 0, batch-1), p.ZRangeWithScores(ctx, lk.lease, 0, 0)}
			}
			for _, qp := range plans[i].queues {
				reads[i] = append(reads[i], read{p.ZRangeWithScores(ctx, qp.q.due, 0, spares-1),
					p.ZRangeWithScores(ctx, qp.q.lease, 0, 0)})
				if qp.given && views[r.Endpoint] == nil && s.viewStale(r.Endpoint) {
					views[r.Endpoint] = &scriptCall{sc: s.lua.gateRead, keys: []string{lk.ep}, args: []any{msArg(now)}}
					views[r.Endpoint].queue(ctx, p)
				}
			}
		}
		return nil
	})
	for i := range reqs {
		for _, r := range append(reads[i], legacy[i]) {
			for _, c := range []*redis.ZSliceCmd{r.due, r.lease} {
				if c == nil {
					continue
				}
				if err := c.Err(); err != nil && !isNil(err) {
					return nil, s.wrap("claim", err)
				}
			}
		}
	}
	for ep, c := range views {
		v, err := s.result(ctx, "gate_read", c)
		if err != nil {
			return nil, err
		}
		g, _, failures, err := decodeGateRead(v)
		if err != nil {
			return nil, err
		}
		s.setView(ep, gateView{gate: g, failures: failures})
	}
	nowMs := float64(now.UnixMilli())
	for i, r := range reqs {
		p := plans[i]
		note := func(z []redis.Z, lease bool) (due []string) {
			for _, m := range z {
				at := time.UnixMilli(int64(m.Score))
				switch {
				case lease:
					if p.nextLease.IsZero() || at.Before(p.nextLease) {
						p.nextLease = at
					}
				case m.Score <= nowMs:
					due = append(due, m.Member.(string))
				default:
					if p.nextDue.IsZero() || at.Before(p.nextDue) {
						p.nextDue = at
					}
				}
			}
			return due
		}
		p.legacyAll = true
		if legacy[i].due != nil {
			p.legacy = note(legacy[i].due.Val(), false)
			note(legacy[i].lease.Val(), true)
			p.legacyAll = len(legacy[i].due.Val()) == 0 && len(legacy[i].lease.Val()) == 0
		}
		for j, qp := range p.queues {
			qp.ids = note(reads[i][j].due.Val(), false)
			note(reads[i][j].lease.Val(), true)
			if qp.given {
				qp.view, _, _ = s.gateOf(ctx, qp.q) // fresh: read above or recently
			}
		}
		p.dueSeen = len(p.legacy) + p.dueIn()
		p.want = min(max(r.Batch, 1), maxBatch, p.dueSeen)
	}
	return plans, nil
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
// at a time in request order among the plans that want more, and cuts the
// candidates to it.
func allot(plans []*endpointPlan, reqs []ClaimRequest, total int) {
	share := make([]int, len(plans))
	if total <= 0 {
		for i, p := range plans {
			share[i] = p.want
		}
	} else {
		for more := true; more && total > 0; {
			more = false
			for i, p := range plans {
				if total > 0 && share[i] < p.want {
					share[i]++
					total--
					more = true
				}
			}
		}
	}
	for i, p := range plans {
		spread(p, share[i])
	}
}

// spread shares an endpoint's batch among its queues, taking from the
// queues in turn (legacy first: they are the oldest): each queue's cap,
// with as many spare candidates again kept behind it.
func spread(p *endpointPlan, batch int) {
	if batch <= 0 {
		p.legacy = nil
		for _, qp := range p.queues {
			qp.ids, qp.cap = nil, 0
		}
		return
	}
	if len(p.legacy) > batch {
		p.legacy = p.legacy[:batch]
	}
	left := batch - len(p.legacy)
	take := make([]int, len(p.queues))
	for more := true; more && left > 0; {
		more = false
		for j, qp := range p.queues {
			if left > 0 && take[j] < len(qp.ids) {
				take[j]++
				left--
				more = true
			}
		}
	}
	for j, qp := range p.queues {
		qp.cap = take[j]
		qp.ids = qp.ids[:min(len(qp.ids), 2*take[j])]
	}
}

// claimPlans runs the claim scripts of the plans, one per slot, in one
// pipeline, and fills out.
func (s *Store) claimPlans(ctx context.Context, reqs []ClaimRequest, plans []*endpointPlan, out []ClaimResult, now time.Time) error {
	base, err := s.token()
	if err != nil {
		return err
	}
	cluster := s.isCluster()
	groups := map[int]*scriptCall{} // by slot (one group, slot 0, on a single node)
	type member struct {
		i  int
		qp *queuePlan
	}
	members := map[*scriptCall][]member{}
	var order, legacyCalls []*scriptCall
	legacyOf := map[*scriptCall]int{}
	n := 0
	nextToken := func() string {
		t := layout2Token + base + "." + strconv.Itoa(n)
		n++
		return t
	}
	for i, r := range reqs {
		p := plans[i]
		br := r.Breaker.WithDefaults(r.Lease)
		leaseUntil, probeUntil := now.Add(r.Lease), now.Add(br.ProbeLease)
		if len(p.legacy) > 0 {
			c := s.legacyClaimCall(keysOf(r.Endpoint), p.legacy, base, &n, now, r.Lease, br)
			legacyCalls = append(legacyCalls, c)
			legacyOf[c] = i
		}
		homeDue := len(p.legacy) > 0
		for _, qp := range p.queues {
			homeDue = homeDue || (qp.q.home && len(qp.ids) > 0)
		}
		for _, qp := range p.queues {
			if len(qp.ids) == 0 {
				continue
			}
			qp.tokens = map[string]string{}
			if qp.given {
				ok, err := s.sharedGate(ctx, qp, out, i, homeDue, probeUntil)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				homeDue = homeDue || qp.view.gate.State == "probe"
			}
			slot := 0
			if cluster {
				slot = keySlot(qp.q.due)
			}
			c := groups[slot]
			if c == nil {
				c = &scriptCall{sc: s.lua.claim, args: []any{msArg(now), 0}}
				groups[slot] = c
				order = append(order, c)
			}
			c.keys = append(c.keys, qp.q.due, qp.q.lease, qp.q.acc)
			gs, gu := gateArgs(qp.view, qp.given)
			c.args = append(c.args, strconv.Itoa(len(qp.ids)), gs, gu, msArg(leaseUntil), msArg(probeUntil),
				strconv.Itoa(qp.cap))
			for _, id := range qp.ids {
				cc, rest, _ := qp.q.record(id)
				tok := qp.tokens[id]
				if tok == "" {
					tok = nextToken()
					qp.tokens[id] = tok
				}
				c.keys = append(c.keys, cc, rest)
				c.args = append(c.args, id, tok)
			}
			c.args[1] = c.args[1].(int) + 1
			members[c] = append(members[c], member{i, qp})
		}
	}
	if len(order)+len(legacyCalls) > 0 {
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range append(order, legacyCalls...) {
				c.queue(ctx, p)
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
	for _, c := range order {
		v, err := s.result(ctx, "claim", c)
		if err != nil {
			keep(err)
			continue
		}
		for k, part := range replyArr(v) {
			if k < len(members[c]) {
				m := members[c][k]
				keep(s.decodeQueueClaim(ctx, m.qp, replyArr(part), &out[m.i], reqs[m.i], now))
			}
		}
	}
	for _, c := range legacyCalls {
		i := legacyOf[c]
		v, err := s.result(ctx, "claim", c)
		if err == nil {
			err = s.decodeLegacyClaim(ctx, keysOf(reqs[i].Endpoint), plans[i].legacy, v, &out[i])
		}
		keep(err)
	}
	for i, r := range reqs {
		s.noteLegacyEmpty(ctx, r.Endpoint, plans[i].legacyAll)
		out[i].MoreDue = plans[i].dueSeen > len(out[i].Claimed)
	}
	return firstErr
}

// sharedGate decides whether a queue of a sharded endpoint (not its home
// queue) is claimed this round, from the gate this replica viewed: a shut
// gate claims nothing (a disabled one drains the candidates); a half-open
// one probes only when no home-slot queue has candidates (the home queue
// takes the probe token itself, atomically), by taking the token on the
// endpoint hash first (admit.lua) and claiming one candidate with it.
func (s *Store) sharedGate(ctx context.Context, qp *queuePlan, out []ClaimResult, i int, homeDue bool, probeUntil time.Time) (bool, error) {
	switch st := qp.view.gate.State; {
	case st == policy.GateOpen:
		return true, nil
	case st == policy.GateHalfOpen:
		if homeDue {
			return false, nil
		}
		tok, err := s.token()
		if err != nil {
			return false, err
		}
		tok = layout2Token + tok
		v, err := s.takeProbe(ctx, qp.q.endpoint, tok, probeUntil)
		if err != nil {
			return false, err
		}
		qp.view = v
		if v.gate.State != "probe" {
			mergeGate(&out[i], v.gate)
			return v.gate.State == policy.GateOpen, nil
		}
		qp.ids, qp.cap = qp.ids[:1], 1
		qp.tokens[qp.ids[0]] = tok
		return true, nil
	case st == policy.GateDisabled:
		mergeGate(&out[i], qp.view.gate)
		moved, err := s.drain2(ctx, qp.q, qp.ids, string(policy.GateDisabled))
		out[i].DeadLettered = append(out[i].DeadLettered, moved...)
		return false, err
	default:
		mergeGate(&out[i], qp.view.gate)
		return false, nil
	}
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

// claimable reports whether a gate lets a claim through.
func claimable(g policy.GateState) bool {
	return g == policy.GateOpen || g == policy.GateHalfOpen || g == "probe"
}

// decodeQueueClaim decodes one queue's part of a claim.lua reply:
// {gate, until, claimed...}.
func (s *Store) decodeQueueClaim(ctx context.Context, qp *queuePlan, a []any, res *ClaimResult, r ClaimRequest, now time.Time) error {
	if len(a) < 2 {
		return fmt.Errorf("redisstore: claim: unexpected reply %v", a)
	}
	g := policy.Gate{State: policy.GateState(replyStr(a[0])), Until: fromMs(replyStr(a[1]))}
	mergeGate(res, g)
	if g.State == policy.GateDisabled {
		gs, _ := gateArgs(qp.view, qp.given)
		moved, err := s.drain2(ctx, qp.q, qp.ids, gs)
		res.DeadLettered = append(res.DeadLettered, moved...)
		return err
	}
	for _, x := range a[2:] {
		c, err := s.decodeClaimed2(ctx, replyArr(x), now, now.Add(r.Lease))
		if err != nil {
			return err
		}
		c.LeaseToken = qp.tokens[c.ID]
		res.Claimed = append(res.Claimed, c)
	}
	return nil
}

// decodeClaimed2 decodes one claimed entry of claim.lua:
// {id, kind, attempts, first attempt ms, due ms, :q or false, field, value, ...}.
func (s *Store) decodeClaimed2(ctx context.Context, r []any, now, leaseUntil time.Time) (*policy.Claimed, error) {
	if len(r) < 6 || len(r)%2 != 0 {
		return nil, fmt.Errorf("redisstore: claim: unexpected entry of %d values", len(r))
	}
	m := make(map[string]string, (len(r)-6)/2)
	for i := 6; i+1 < len(r); i += 2 {
		m[replyStr(r[i])] = replyStr(r[i+1])
	}
	id := replyStr(r[0])
	rest, _ := r[5].(string)
	c, err := decodeRecord2(id, m, rest, func(tag string) string { return s.issuerOf(ctx, tag) })
	if err != nil {
		return nil, err
	}
	return &policy.Claimed{
		ID: id, Endpoint: c.Endpoint, Issuer: c.Issuer, Method: c.Method, Path: c.Path, Query: c.Query,
		Header: c.Header, Body: c.Body, IdempotencyKey: c.IdempotencyKey, SourceRecord: c.SourceRecord,
		ReplayOf: c.ReplayOf, Attempt: int(replyInt(r[2])), Kind: policy.Kind(replyStr(r[1])),
		LeaseToken: "", LeaseExpiresAt: msTime(leaseUntil), StartedAt: msTime(now),
		DueAt: time.UnixMilli(scoreMs(r[4])), FirstAttemptAt: fromMs(replyStr(r[3])), CreatedAt: c.CreatedAt,
		TraceContext: c.TraceContext,
	}, nil
}

// legacyCheck is how often a round looks at an endpoint's legacy due and
// lease sets once they were seen empty (an old replica of a rolling
// upgrade may still fill them).
const legacyCheck = 10 * time.Second

// legacyDue reports whether this round reads endpoint's legacy sets: until
// they are seen empty, then every legacyCheck.
func (s *Store) legacyDue(endpoint string, now time.Time) bool {
	if _, noted := s.legacyEmpty.Load(endpoint); !noted {
		return true
	}
	st := s.shardState(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	if now.Sub(st.legacyAt) < legacyCheck {
		return false
	}
	st.legacyAt = now
	return true
}

// noteLegacyEmpty marks, once per Store and endpoint, that the endpoint's
// legacy due and lease sets were seen empty (keys.go "Layout 1"):
// create.lua stops counting them ('L' = "0") and stops looking up legacy
// reservations once the longest retention has passed from now ('Lr', set
// once): by then every legacy record is gone. Legacy items seen again
// (an old replica still running) clear both. Best effort: a failure only
// keeps legacy work counted and looked up.
func (s *Store) noteLegacyEmpty(ctx context.Context, endpoint string, empty bool) {
	_, noted := s.legacyEmpty.Load(endpoint)
	switch {
	case empty && !noted:
		until := s.now().Add(max(s.idemTTL, s.dlTTL))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, keysOf(endpoint).ep, eLegacy, "0")
			p.HSetNX(ctx, keysOf(endpoint).ep, eLegacyUntil, msArg(until))
			return nil
		})
		if err == nil {
			s.legacyEmpty.Store(endpoint, struct{}{})
		}
	case !empty && noted:
		if s.rdb.HDel(ctx, keysOf(endpoint).ep, eLegacy, eLegacyUntil).Err() == nil {
			s.legacyEmpty.Delete(endpoint)
		}
	}
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
