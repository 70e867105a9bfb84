package keyspace

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
)

// shardSlot is the slot of the hash tag {sN}.
func shardSlot(n int) int { return Slot(Tag(n)) }

// QueueShards returns the shard (hash tag number) of each of the n queues
// of endpoint ("Shards and queues"): queue 0 is the endpoint's own shard,
// ShardOf(endpoint), where its endpoint hash lives; queue q ≥ 1 is the
// unused shard whose slot is nearest to slot(queue 0) + q·16384/n, so the
// queues spread evenly over the slot space and hence over the primaries of
// a cluster whose slots are split evenly (redis-cli --cluster create). A
// pure function of (endpoint, n): every replica computes the same queues.
// n is clamped to 1 … Shards.
func QueueShards(endpoint string, n int) []int {
	n = min(max(n, 1), Shards)
	home := ShardOf(endpoint)
	out := []int{home}
	used := map[int]bool{home: true}
	base := shardSlot(home)
	for q := 1; q < n; q++ {
		target := (base + q*ClusterSlots/n) % ClusterSlots
		best, bestD := -1, ClusterSlots
		for m := range Shards {
			if used[m] {
				continue
			}
			d := shardSlot(m) - target
			if d < 0 {
				d = -d
			}
			d = min(d, ClusterSlots-d)
			if d < bestD {
				best, bestD = m, d
			}
		}
		used[best] = true
		out = append(out, best)
	}
	return out
}

// Queue is one queue of an endpoint: its due and
// lease sets, records, reservations, dead letters and backlog counters,
// all under one hash tag. An endpoint with shards: 1 has one queue, its
// home queue, in the endpoint hash's slot. Every field is a key name but
// Endpoint, Shard, Home, Tag, Org and Part.
type Queue struct {
	Endpoint string
	Shard    int
	// Home: the endpoint hash is in this queue's slot, so its scripts read
	// the gate and apply the breaker themselves, and its counters are the
	// endpoint hash's.
	Home bool
	Tag  string // "cp:{sN}:"
	// Due and Lease are the due and lease sets (ZSET id -> ms), Counters
	// the backlog counters (the endpoint hash for the home queue, else
	// cp:{sN}:a:{ep}), DL and DLB the dead-letter index and its bytes,
	// SFO and SFX the shard's Salesforce outbox and its expiry schedule.
	Due, Lease, Counters, DL, DLB, SFO, SFX string
	EndpointHash                            string // the endpoint hash (home slot)
	// Org is the issuer tag of an organisation queue (ForOrg): its due and
	// lease sets hold that organisation's callouts only, so a claim can
	// take from the organisations in turn (fair dispatch, contract §10).
	// "" for the shard's queue of callouts without an issuer, and for a
	// queue used only for its records, reservations and dead letters.
	Org string
	// Part is the breaker partition the queue's callouts meet and test
	// (contract §6): Org with breaker.partition organisation, else "".
	Part string
}

// ForOrg returns the organisation queue of issuer tag org in q's shard
// ("Organisation queues"): the same records, reservations, dead
// letters and counters, its own due and lease sets; part is its breaker
// partition ("" or org).
func (q Queue) ForOrg(org, part string) Queue {
	id := queueID{endpoint: q.Endpoint, shard: q.Shard, org: org, part: part, orgQueue: true}
	if c, ok := queues.get(id); ok {
		return c
	}
	q.Org, q.Part = org, part
	base := q.Tag + "d:" + q.Endpoint
	q.Due, q.Lease = base, q.Tag+"l:"+q.Endpoint
	if org != "" {
		q.Due, q.Lease = base+":"+org, q.Lease+":"+org
	}
	queues.put(id, q)
	return q
}

// HomeQueue returns endpoint's home queue, in the endpoint hash's shard.
func HomeQueue(endpoint string) Queue { return QueueAt(endpoint, ShardOf(endpoint)) }

// QueueAt returns the queue of endpoint in shard n.
func QueueAt(endpoint string, n int) Queue {
	id := queueID{endpoint: endpoint, shard: n}
	if c, ok := queues.get(id); ok {
		return c
	}
	t := ShardPrefix(n)
	home := ShardOf(endpoint) == n
	q := Queue{
		Endpoint: endpoint, Shard: n, Home: home, Tag: t,
		Due: t + "d:" + endpoint, Lease: t + "l:" + endpoint,
		DL: t + "dl:" + endpoint, DLB: t + "dlb:" + endpoint,
		SFO: OutboxOf(n).Due, SFX: OutboxOf(n).Expiry,
		EndpointHash: Endpoint(endpoint),
	}
	q.Counters = q.EndpointHash
	if !home {
		q.Counters = t + "a:" + endpoint
	}
	queues.put(id, q)
	return q
}

// QueueOfID returns the queue holding callout id of endpoint (the shard
// its id starts with); false for a malformed id.
func QueueOfID(endpoint, id string) (Queue, bool) {
	n, ok := ShardOfID(id)
	if !ok {
		return Queue{}, false
	}
	return QueueAt(endpoint, n), true
}

// queueID names one queue value QueueAt or ForOrg makes: a pure function
// of these, so each is built once (its ~15 key strings) and then copied.
type queueID struct {
	endpoint  string
	shard     int
	org, part string
	orgQueue  bool // made by ForOrg (org "" included)
}

// queueMemo is the bounded memo of queue values (queues). Endpoint
// names come from the configuration, but a callout id or admin path may
// name any, so past queueMemoMax entries a queue is built each time.
type queueMemo struct {
	mu sync.RWMutex
	m  map[queueID]Queue
}

const queueMemoMax = 1 << 14

var queues = queueMemo{m: map[queueID]Queue{}}

func (c *queueMemo) get(id queueID) (Queue, bool) {
	c.mu.RLock()
	q, ok := c.m[id]
	c.mu.RUnlock()
	return q, ok
}

func (c *queueMemo) put(id queueID, q Queue) {
	c.mu.Lock()
	if len(c.m) < queueMemoMax {
		c.m[id] = q
	}
	c.mu.Unlock()
}

// Record returns the record key of callout id in this queue, and its :q
// and :r keys.
func (q Queue) Record(id string) (c, rest, resp string) {
	c = q.Tag + "c:" + id
	return c, c + ":q", c + ":r"
}

// Reservation returns the reservation key of (issuer, this queue's
// endpoint, key), or "" when key is empty: cp:{sN}:i:{h}, h the first 12
// bytes (96 bits) of sha256(endpoint "\x00" issuer "\x00" key) in
// base64url — the scope of contract §5 (issuer, endpoint, key); the
// endpoint is mixed in because two endpoints may share a shard.
func (q Queue) Reservation(issuer, key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte(q.Endpoint + "\x00" + issuer + "\x00" + key))
	return q.Tag + "i:" + base64.RawURLEncoding.EncodeToString(h[:12])
}

// KeyQueue picks the queue index (0 … n-1) of a keyed callout: a function
// of its reservation scope, so a key always maps to the queue holding its
// reservation.
func KeyQueue(endpoint, issuer, key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := sha256.Sum256([]byte(endpoint + "\x00" + issuer + "\x00" + key))
	return int(uint(h[0])<<8|uint(h[1])) % n
}

// KeyedQueue returns the queue of endpoint, of its n queues, that holds a
// keyed callout's reservation and record (KeyQueue of QueueShards).
func KeyedQueue(endpoint, issuer, key string, n int) Queue {
	return QueueAt(endpoint, QueueShards(endpoint, n)[KeyQueue(endpoint, issuer, key, n)])
}

// IDOfRaw rebuilds a callout id from the shard of its queue and its 16 raw
// random bytes (how a reservation stores it).
func IDOfRaw(shard int, raw string) string {
	return fmt.Sprintf("%02x", shard) + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// RawOfID returns the 16 random bytes of a well-formed callout id, "" for
// anything else.
func RawOfID(id string) string {
	if _, ok := ShardOfID(id); !ok {
		return ""
	}
	b, _ := base64.RawURLEncoding.DecodeString(id[2:])
	return string(b)
}
