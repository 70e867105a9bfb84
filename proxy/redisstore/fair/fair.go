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
// (shard) given the fewest; never more than a queue's Due, nor more to one
// organisation than its room (room[org], when present: the most this
// claim may give it, Room). The j-th result is how many to claim from
// qs[j]. So a slot that frees while one organisation's backlog fills the
// endpoint goes to another organisation with work due.
func Spread(qs []Queue, batch, rot int, room map[string]int) []int {
	left := max(batch, 0)
	take := make([]int, len(qs))
	load, given := map[string]int{}, map[string]int{}
	for _, q := range qs {
		load[q.Org] += q.Leased
	}
	n := len(qs)
	for left > 0 {
		best := -1
		for k := range n {
			j := (rot + k) % max(n, 1)
			q := qs[j]
			if r, ok := room[q.Org]; take[j] >= q.Due || ok && given[q.Org] >= r {
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
		take[best]++
		load[qs[best].Org]++
		given[qs[best].Org]++
		left--
	}
	return take
}

// Room is what each organisation of qs may still take when the caller
// lets at most orgCap attempts of one organisation run at once (orgCap
// ≤ 0: no cap, nil) and has inFlight[org] of them running: orgCap minus
// that, at least 0. Capped is how many of qs's due callouts that leaves
// out (the claim reports no more due for them).
func Room(qs []Queue, orgCap int, inFlight map[string]int) (room map[string]int, capped int) {
	if orgCap <= 0 {
		return nil, 0
	}
	room = map[string]int{}
	due := map[string]int{}
	for _, q := range qs {
		room[q.Org] = max(orgCap-inFlight[q.Org], 0)
		due[q.Org] += q.Due
	}
	for org, d := range due {
		capped += max(d-room[org], 0)
	}
	return room, capped
}
