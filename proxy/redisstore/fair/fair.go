// Package fair shares a claim's slots (contract §10 "Fair dispatch"):
// between the endpoints of one claim, in the caller's order, and within an
// endpoint between its organisation queues, so one organisation's backlog
// delays another's by at most one attempt per slot. Pure functions of what
// the claim's candidates pipeline read (proxy/redisstore claim.go); no I/O.
package fair

// Shares gives each of wants its share of total (≤ 0: each its want), one
// slot at a time in order among those that want more: the i-th result is
// the i-th want's share, at most that want.
func Shares(wants []int, total int) []int {
	share := make([]int, len(wants))
	if total <= 0 {
		copy(share, wants)
		return share
	}
	for more := true; more && total > 0; {
		more = false
		for i, w := range wants {
			if total > 0 && share[i] < w {
				share[i]++
				total--
				more = true
			}
		}
	}
	return share
}

// Queue is one organisation queue of an endpoint as a claim read it: Org
// its organisation (issuer tag, "" callouts without one), Leased its
// callouts in flight (every replica's, its lease set), Due how many due
// candidates the claim may take from it.
type Queue struct {
	Org         string
	Leased, Due int
}

// Spread shares an endpoint's batch among its queues fairly across
// organisations: one slot at a time to the organisation with the fewest
// callouts in flight (Leased) plus slots given in this claim, ties broken
// in a rotating order starting at queue rot, and within it to its queue
// (shard) given the fewest; never more than a queue's Due, nor more than
// room allows (nil: no bound; Room). The j-th result is how many to claim
// from qs[j]. So a slot that frees while one organisation's backlog fills
// the endpoint goes to another organisation with work due.
func Spread(qs []Queue, batch, rot int, room *Room) []int {
	left := max(batch, 0)
	take := make([]int, len(qs))
	load, given := map[string]int{}, map[string]int{}
	for _, q := range qs {
		load[q.Org] += q.Leased
	}
	pool, kept := 0, false
	if room != nil {
		pool = room.Pool
	}
	n := len(qs)
	for left > 0 {
		best := -1
		for k := range n {
			j := (rot + k) % max(n, 1)
			q := qs[j]
			if take[j] >= q.Due || !room.allows(q.Org, given[q.Org], pool, kept) {
				continue
			}
			if best < 0 {
				best = j
				continue
			}
			b := qs[best]
			if lj, lb := load[q.Org], load[b.Org]; lj < lb || (lj == lb && q.Org == b.Org && take[j] < take[best]) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		org := qs[best].Org
		if room != nil {
			if pool > 0 {
				pool--
			} else {
				kept = true // the kept slot, to an organisation with none in flight
			}
		}
		take[best]++
		load[org]++
		given[org]++
		left--
	}
	return take
}

// Room is what one claim may give an endpoint's organisations when the
// caller keeps one of its slots for an organisation with none in flight
// (contract §10 "Fair dispatch"): all of them together at most Pool (the
// caller's cap minus its attempts in flight, InFlight by organisation),
// and one slot beyond that to an organisation with nothing in flight here
// and nothing given yet. So however many organisations flood the endpoint,
// the last slot stays free for one that is not running. (No organisation
// needs a bound of its own: Pool is at most the cap minus its own.)
type Room struct {
	Pool     int
	InFlight map[string]int
}

// allows reports whether one more slot may go to org, already given
// given in this claim, with pool slots of the shared pool left and kept
// whether the kept slot went; true for a nil Room.
func (r *Room) allows(org string, given, pool int, kept bool) bool {
	return r == nil || pool > 0 || (!kept && given == 0 && r.InFlight[org] == 0)
}

// RoomFor is the Room of qs when the caller lets at most orgCap attempts
// run at once that are not an idle organisation's first (orgCap ≤ 0: no
// cap, nil) and has inFlight[org] of them running. Capped is how many of
// qs's due callouts that leaves out (the claim reports no more due for
// them).
func RoomFor(qs []Queue, orgCap int, inFlight map[string]int) (room *Room, capped int) {
	if orgCap <= 0 {
		return nil, 0
	}
	running := 0
	for _, n := range inFlight {
		running += n
	}
	room = &Room{Pool: max(orgCap-running, 0), InFlight: inFlight}
	total, limit := 0, room.Pool
	idle := map[string]bool{}
	for _, q := range qs {
		total += q.Due
		if q.Due > 0 && inFlight[q.Org] == 0 {
			idle[q.Org] = true
		}
	}
	if len(idle) > 0 {
		limit++ // the kept slot
	}
	return room, max(total-limit, 0)
}
