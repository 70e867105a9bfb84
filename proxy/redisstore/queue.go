package redisstore

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"sync"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// shardSlot is the slot of the hash tag {sN}.
func shardSlot(n int) int { return keyspace.Slot(keyspace.Tag(n)) }

// queueShards returns the shard (hash tag number) of each of the n queues
// of endpoint (keyspace "Shards and queues"): queue 0 is the endpoint's own shard,
// keyspace.ShardOf(endpoint), where its endpoint hash lives; queue q ≥ 1 is the
// unused shard whose slot is nearest to slot(queue 0) + q·16384/n, so the
// queues spread evenly over the slot space and hence over the primaries of
// a cluster whose slots are split evenly (redis-cli --cluster create). A
// pure function of (endpoint, n): every replica computes the same queues.
// n is at least 1 and at most keyspace.Shards.
func queueShards(endpoint string, n int) []int {
	n = min(max(n, 1), keyspace.Shards)
	home := keyspace.ShardOf(endpoint)
	out := []int{home}
	used := map[int]bool{home: true}
	base := shardSlot(home)
	for q := 1; q < n; q++ {
		target := (base + q*keyspace.ClusterSlots/n) % keyspace.ClusterSlots
		best, bestD := -1, keyspace.ClusterSlots
		for m := range keyspace.Shards {
			if used[m] {
				continue
			}
			d := shardSlot(m) - target
			if d < 0 {
				d = -d
			}
			d = min(d, keyspace.ClusterSlots-d)
			if d < bestD {
				best, bestD = m, d
			}
		}
		used[best] = true
		out = append(out, best)
	}
	return out
}

// queue is one queue of an endpoint (keyspace): its due and
// lease sets, records, reservations, dead letters and backlog counters,
// all under one hash tag. An endpoint with shards: 1 has one queue, its
// home queue, in the endpoint hash's slot.
type queue struct {
	endpoint string
	shard    int
	// home: the endpoint hash is in this queue's slot, so its scripts read
	// the gate and apply the breaker themselves, and its counters are the
	// endpoint hash's.
	home                               bool
	tag                                string // "cp:{sN}:"
	due, lease, acc, dl, dlb, sfo, sfx string
	ep                                 string // the endpoint hash (home slot)
	// org is the issuer tag of an organisation queue (forOrg): its due and
	// lease sets hold that organisation's callouts only, so a claim can
	// take from the organisations in turn (fair dispatch, contract §10).
	// "" for the shard's queue of callouts without an issuer, and for a
	// queue used only for its records, reservations and dead letters.
	org string
	// part is the breaker partition the queue's callouts meet and test
	// (contract §6): org with breaker.partition organisation, else "".
	part string
}

// forOrg returns the organisation queue of issuer tag org in q's shard
// (keyspace "Organisation queues"): the same records, reservations, dead
// letters and counters, its own due and lease sets; part is its breaker
// partition ("" or org, Store.partition).
func (q queue) forOrg(org, part string) queue {
	id := queueID{endpoint: q.endpoint, shard: q.shard, org: org, part: part, orgQueue: true}
	if c, ok := queues.get(id); ok {
		return c
	}
	q.org, q.part = org, part
	base := q.tag + "d:" + q.endpoint
	q.due, q.lease = base, q.tag+"l:"+q.endpoint
	if org != "" {
		q.due, q.lease = base+":"+org, q.lease+":"+org
	}
	queues.put(id, q)
	return q
}

// homeQueue returns endpoint's home queue, in the endpoint hash's shard.
func homeQueue(endpoint string) queue { return queueAt(endpoint, keyspace.ShardOf(endpoint)) }

// queueAt returns the queue of endpoint in shard n.
func queueAt(endpoint string, n int) queue {
	id := queueID{endpoint: endpoint, shard: n}
	if c, ok := queues.get(id); ok {
		return c
	}
	t := keyspace.ShardPrefix(n)
	home := keyspace.ShardOf(endpoint) == n
	q := queue{
		endpoint: endpoint, shard: n, home: home, tag: t,
		due: t + "d:" + endpoint, lease: t + "l:" + endpoint,
		dl: t + "dl:" + endpoint, dlb: t + "dlb:" + endpoint,
		sfo: keyspace.OutboxOf(n).Due, sfx: keyspace.OutboxOf(n).Expiry,
		ep: keyspace.Endpoint(endpoint),
	}
	q.acc = q.ep
	if !home {
		q.acc = t + "a:" + endpoint
	}
	queues.put(id, q)
	return q
}

// queueID names one queue value queueAt or forOrg makes: a pure function
// of these, so each is built once (its ~15 key strings) and then copied.
type queueID struct {
	endpoint  string
	shard     int
	org, part string
	orgQueue  bool // made by forOrg (org "" included)
}

// queueMemo is the bounded memo of queue values (queues). Endpoint
// names come from the configuration, but a callout id or admin path may
// name any, so past queueMemoMax entries a queue is built each time.
type queueMemo struct {
	mu sync.RWMutex
	m  map[queueID]queue
}

const queueMemoMax = 1 << 14

var queues = queueMemo{m: map[queueID]queue{}}

func (c *queueMemo) get(id queueID) (queue, bool) {
	c.mu.RLock()
	q, ok := c.m[id]
	c.mu.RUnlock()
	return q, ok
}

func (c *queueMemo) put(id queueID, q queue) {
	c.mu.Lock()
	if len(c.m) < queueMemoMax {
		c.m[id] = q
	}
	c.mu.Unlock()
}

// record returns the record key of callout id in this queue, and its :q
// and :r keys.
func (q queue) record(id string) (c, rest, resp string) {
	c = q.tag + "c:" + id
	return c, c + ":q", c + ":r"
}

// reservation returns the reservation key of (issuer, this queue's
// endpoint, key), or "" when key is empty: cp:{sN}:i:{h}, h the first 12
// bytes (96 bits) of sha256(endpoint "\x00" issuer "\x00" key) in
// base64url — the scope of contract §5 (issuer, endpoint, key); the
// endpoint is mixed in because two endpoints may share a shard.
func (q queue) reservation(issuer, key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte(q.endpoint + "\x00" + issuer + "\x00" + key))
	return q.tag + "i:" + base64.RawURLEncoding.EncodeToString(h[:12])
}

// keyQueue picks the queue index (0 … n-1) of a keyed callout: a function
// of its reservation scope, so a key always maps to the queue holding its
// reservation.
func keyQueue(endpoint, issuer, key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := sha256.Sum256([]byte(endpoint + "\x00" + issuer + "\x00" + key))
	return int(uint(h[0])<<8|uint(h[1])) % n
}

// idOfRaw rebuilds a callout id from the shard of its queue and its 16 raw
// random bytes (how a reservation stores it).
func idOfRaw(shard int, raw string) string {
	return hex2(shard) + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// rawOfID returns the 16 random bytes of a well-formed callout id, "" for
// anything else.
func rawOfID(id string) string {
	if _, ok := keyspace.ShardOfID(id); !ok {
		return ""
	}
	b, _ := base64.RawURLEncoding.DecodeString(id[2:])
	return string(b)
}

func hex2(n int) string {
	s := strconv.FormatInt(int64(n), 16)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}
