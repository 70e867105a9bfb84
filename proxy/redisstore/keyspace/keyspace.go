// Package keyspace names every Redis key and channel of the proxy: the store's
// core (proxy/redisstore), its Salesforce outbox, replay jobs and gate cache
// all build their keys here, so this is the one place the data model is told.
//
// Every key of one endpoint queue carries the hash
// tag {sN} of its shard, so all keys one script touches are in one Redis
// Cluster slot; every script receives every key it touches in KEYS
// (ARCHITECTURE.md "Redis data model"). These are all of the proxy's keys; no
// package but this one spells a key's name.
//
// Shards and queues (queue.go: Queue, its key builders and the shard
// choice). An endpoint's home shard is N = crc32.ChecksumIEEE(endpoint) % Shards; its endpoint hash, dead-letter
// index of the home queue and outbox entries about the endpoint live there.
// With shards: 1 (the default) the endpoint has one queue, in its home
// shard. With shards: K it has K queues: the home one and K-1 more in the
// shards QueueShards picks, spread over the slot space (a pure function
// of endpoint and K). A callout's id starts with its queue's shard in hex,
// so every key of the callout is found from its id. Keys marked "per
// queue" below exist once per queue, under that queue's tag.
//
// Organisation queues (fair dispatch, contract §10). Each queue's due and
// lease sets are split by organisation (issuer tag): a claim then takes
// from the organisations in turn, each slot to the one with the fewest
// callouts in flight, instead of in due order across them. The
// organisations of a queue are those with pending items in its counters
// ('ii:' tag); no other registry is kept. Records, reservations, dead
// letters and counters stay per queue.
//
// Breaker partitions (contract §6). With breaker.partition organisation
// each organisation has its own breaker in the endpoint hash, the breaker
// fields suffixed ":" tag (cf:tag bs:tag oa:tag pa:tag pt:tag pe:tag), and
// 'po' lists the open ones with the time of each one's last counting
// failure, "tag:ms,tag:ms" (lib.lua po_live); the unsuffixed fields are the
// endpoint's own breaker (lib.lua).
//
// The keys:
//
//	cp:{sN}:c:{id}        HASH  one callout, one-letter fields (the f*
//	                            constants in package record), every value at most
//	                            64 bytes so Redis keeps it in its compact
//	                            listpack encoding: state code S, attempts n,
//	                            issuer tag i (the issuer: cp:iss), charged
//	                            bytes b, the packed meta m m2 … (method,
//	                            endpoint, path, query, key, source record,
//	                            created ms, trace context), the packed
//	                            headers and body 1 … 8 (or Q and :q), the
//	                            lease t x l k, d once a dispatcher claimed it,
//	                            attempts A<n>, the last response R and
//	                            r1 … r4 (or :r), e, F, D, o, rb, rt (and rx,
//	                            rxt once that replay chain ended, deadletters/marks.go). A field a
//	                            script drops is blanked (""). No fingerprint:
//	                            the reservation holds it. Not kept: the due
//	                            time (the due set's score). A pending keyed
//	                            callout with a 31-byte body costs 442–479
//	                            bytes in all by used_memory (record 216,
//	                            reservation 104, due entry ~118 by MEMORY
//	                            USAGE, and the main dict's table;
//	                            TestPendingCalloutMemory, docs/performance.md
//	                            "Memory per pending callout").
//	cp:{sN}:c:{id}:q      STRING the packed headers and body when longer
//	                            than 8 chunks (absent otherwise).
//	cp:{sN}:c:{id}:r      STRING the last upstream response when longer than
//	                            4 chunks: "status cut\n" header JSON "\n" body
//	                            (capped) (absent otherwise).
//	                            TTL of the three: none while pending
//	                            (scheduled, held, in_flight); succeeded or
//	                            failed: the idempotency retention (24 h), and
//	                            :q is deleted; dead_lettered: the dead-letter
//	                            retention (720 h). Set in the script that
//	                            ends it.
//	cp:{sN}:i:{h}         STRING per queue: the idempotency reservation of
//	                            (issuer, endpoint, key): h is base64url of
//	                            the first 12 bytes of sha256(endpoint "\x00"
//	                            issuer "\x00" key); the value is the holder's
//	                            16 random id bytes then the first 12 bytes of
//	                            its request fingerprint (policy.Fingerprint)
//	                            — 28 bytes (contract §5). A keyed callout's queue
//	                            is its key's (KeyQueue), so the reservation
//	                            and the record share a slot. TTL: none while
//	                            the callout is pending, except Begin's,
//	                            created with lease + idempotency retention
//	                            (a first attempt that ends in time needs no
//	                            other write; a retry or a reap removes it);
//	                            then the callout's.
//	cp:{sN}:d:{ep}:{tag}  ZSET  per organisation queue: callout id -> due
//	                            time (Unix ms) of the scheduled AND held
//	                            callouts of the organisation of issuer tag
//	                            tag (cp:{sN}:d:{ep} for callouts without an
//	                            issuer). Held ones are simply not claimed
//	                            while their gate is shut. No TTL.
//	cp:{sN}:l:{ep}:{tag}  ZSET  per organisation queue: callout id -> lease
//	                            expiry (Unix ms) of in_flight callouts
//	                            (cp:{sN}:l:{ep} without an issuer). No TTL.
//	cp:{sN}:a:{ep}        HASH  per queue but the home one (whose counters
//	                            are the endpoint hash's): the queue's backlog
//	                            counters bb, bi, ii:{tag}, ib:{tag} (below);
//	                            each queue enforces 1/K of the caps. No TTL.
//	cp:iss                HASH  issuer tag -> issuer (JWT iss) of every
//	                            issuer a record was made for.
//	                            Written once per issuer and process before
//	                            its first record (proxy/redisstore/issuers).
//	                            Not hash-tagged. No TTL.
//	cp:{sN}:ep:{ep}       HASH  endpoint state, in the home shard: circuit
//	                            breaker, pause, disable, outage, the home
//	                            queue's backlog counters — bb bytes charged
//	                            (pending callouts and dead letters), bi
//	                            pending items, ii:{tag} / ib:{tag} an
//	                            issuer's items and bytes — sq (the shard
//	                            counts used), and each organisation's
//	                            breaker partition: the breaker fields
//	                            suffixed ":" tag, and po (open partitions)
//	                            (the e* constants in endpoint.go). No TTL.
//	cp:{sN}:dl:{ep}       ZSET  per queue: callout id -> dead-lettered at (Unix ms):
//	                            the index for listing dead letters; entries
//	                            older than the dead-letter retention are
//	                            pruned, two at a time, whenever a new dead
//	                            letter is added, and by the replay runner's
//	                            hourly sweep
//	                            (Store.PruneDeadLetters). No TTL.
//	cp:{sN}:dlb:{ep}      HASH  per queue: dead-letter id -> "bytes tag": what the dead
//	                            letter is charged in the endpoint's backlog
//	                            bytes ('bb') and its issuer's ('ib:' tag),
//	                            released when its index entry is pruned
//	                            (expiry) or it is discarded. No TTL: fields
//	                            go with their index entries.
//	cp:{sN}:sfo           ZSET  the shard's Salesforce outbox (outbox/):
//	                            entry name -> due time (Unix ms); while
//	                            claimed, its lease expiry. Names are kind ":"
//	                            keys (m: e: o: d: s: and the salesforce
//	                            package's own). Queued in the same script as
//	                            the dead letter, disable or ending that
//	                            causes them (only with Options.Outbox).
//	                            No TTL: an entry goes when written.
//	cp:{sN}:sfo:d         HASH  per outbox entry: p:{entry} its payload,
//	                            n:{entry} failed tries, e:{entry} last error;
//	                            k:{id} when a callout record was first kept
//	                            for its queued writes (Unix ms, outbox
//	                            keep.lua). Fields go with their entry (k:
//	                            with the record's last queued write). No TTL.
//	cp:{sN}:sfx           ZSET  dead-letter copy id -> when its record's TTL
//	                            ends (Unix ms): the expiry check that marks
//	                            its Failed_Callout__c Expired without
//	                            keyspace notifications. No TTL.
//	cp:{sN}:sfs           HASH  Failed_Callout__c record state by root id:
//	                            s:{root} status, t:{root} its event ms,
//	                            rc:{root} latest replay chain, v:{root}
//	                            version, a:{root} latest admin request
//	                            answered (ms); r:{copy} -> root of a replay dead
//	                            letter. Dropped with the record's last
//	                            write or final status. No TTL.
//	cp:sf:pause           STRING Unix ms until which Salesforce writes pause
//	                            (REQUEST_LIMIT_EXCEEDED). Not hash-tagged.
//	                            TTL: until then.
//	cp:sf:flush           STRING the Salesforce flush lease: "owner|until
//	                            ms" (outbox/flush.go; Redis's clock, renewed
//	                            while a batch is in flight); one replica
//	                            writes a batch at a time. TTL: a minute past
//	                            its end.
//	                            Not hash-tagged.
//	cp:sf:defer           HASH  deferrals of Salesforce writes after failed
//	                            calls, by scope ("" all, or an sObject):
//	                            u:{scope} until (Unix ms), n:{scope} failed
//	                            calls in a row. No TTL. Not hash-tagged.
//	cp:sf:wm:{name}       STRING a Salesforce poll's watermark (Unix ms),
//	                            e.g. of Discarded records. Not hash-tagged.
//	                            No TTL.
//	cp:sf:rq:{root}:{ms}  STRING a reprocess request from Salesforce: the
//	                            record of root seen as Reprocess Requested
//	                            with SystemModstamp ms (outbox/reprocess.go).
//	                            The claiming replica's token (TTL: its
//	                            lease), then "done" (TTL: the dead-letter
//	                            retention). Not hash-tagged.
//	cp:lock:{name}        STRING a replica-wide lock's holder (TryLock);
//	                            TTL: the lock's. Not hash-tagged.
//	cp:{sfsub}:lease:{topic}  STRING the token of the replica that
//	                            subscribes to the Salesforce Pub/Sub API
//	                            topic (e.g. /data/Failed_Callout__ChangeEvent),
//	                            one replica at a time (proxy/redisstore/sfsub).
//	                            TTL: the lease's, renewed by its holder while
//	                            it runs, so another replica takes over when
//	                            it dies.
//	cp:{sfsub}:replay:{topic} STRING the replay id (opaque bytes, as a
//	                            FetchResponse gives it) after the last batch
//	                            of events the holder handled; a restarted or
//	                            new holder subscribes after it (replay
//	                            preset CUSTOM). Written only by the lease's
//	                            holder (one script reads the lease), hence
//	                            the shared hash tag {sfsub}. No TTL:
//	                            Salesforce keeps events 72 hours ("Event
//	                            Message Durability"), and an expired id is
//	                            answered with an error the subscriber
//	                            handles (it resubscribes LATEST).
//	cp:{sfsub}:again:{topic}  ZSET  the reprocess requests the subscriber
//	                            deferred (a full backlog, paused writes, a
//	                            claim of another replica): Salesforce record
//	                            Id -> when to look again (ms). Whichever
//	                            replica holds the lease looks at the due
//	                            ones (a look moves them a lease later, so a
//	                            replica dying mid-look loses none) and
//	                            removes the ones it settled. No TTL: every
//	                            entry is removed once settled.
//	cp:job:{J}            HASH  one replay job (contract §8; the j* constants
//	                            of proxy/redisstore/jobs): its spec, state,
//	                            phase, counters, collect and send positions
//	                            and the lease of the replica running it
//	                            (owner token, expiry ms). The hash tag is
//	                            the job id J (base64url of 16 random bytes),
//	                            so its three keys share a slot. TTL: none
//	                            until the job ends; then the
//	                            job retention (7 days by default), set on all
//	                            three in the script that ends it.
//	cp:job:{J}:items      HASH  dead-letter id -> its state in the job ("q"
//	                            queued, "p" sending, "w" would-send in a dry
//	                            run, or "status|replay id|detail" once
//	                            handled): the set of dead letters the job has
//	                            taken, so each is replayed at most once per
//	                            job however its filters overlap. TTL: the
//	                            job's.
//	cp:job:{J}:queue      LIST  the job's dead-letter ids in collection order;
//	                            the job's send position indexes it. TTL: the
//	                            job's.
//	cp:jobs               ZSET  job id -> created (Unix ms): every job, for
//	                            listing; entries of expired jobs are dropped
//	                            when listed. Not hash-tagged. No TTL.
//	cp:jobs:active        SET   ids of jobs that have not ended: what the
//	                            replicas' job runners look at. Not
//	                            hash-tagged. No TTL.
//	cp:layout             STRING the store's layout version (layout.Version,
//	                            layout.go), in decimal: written by the first
//	                            replica that uses the store (layout.Check) or
//	                            by `callout-proxy migrate`; a replica refuses
//	                            to start on another version. Not hash-tagged:
//	                            one key, one slot. No TTL.
//	cp:endpoints          SET   names of every endpoint this store has seen.
//	                            Not hash-tagged (it lives in its own slot and
//	                            no script touches it); read only by the
//	                            backlog gatherer and the admin API. No TTL.
//	cp:{sN}:st:m:{ep}:{M} HASH  the console's figures of endpoint ep in Unix
//	                            minute M, summed over every replica that
//	                            counted some (proxy/redisstore/stats): s r p
//	                            attempts by class, d dead letters, ms the
//	                            attempts' summed duration, b0 … b12 the
//	                            latency histogram (stats.LatencyBounds). In
//	                            the endpoint's home shard. Written by
//	                            HINCRBY, every few seconds per replica.
//	                            TTL: 25 h (stats.MinuteRetention), renewed
//	                            by each write.
//	cp:{sN}:st:h:{ep}:{H} HASH  the same figures of Unix hour H. TTL: 8 days
//	                            (stats.HourRetention).
//	cp:ack                STRING an integer each durable acknowledgement
//	                            round increments before its WAIT
//	                            (proxy/redisstore/durable, redis.durability
//	                            replicated or fsync). Not hash-tagged. No
//	                            TTL. On a Cluster, per primary: cp:{tag}:ack
//	                            (AckFor), in the hash tag of a key that
//	                            primary owns.
//
// Two pub/sub channels, which store nothing:
//
//	cp:gate               CHANNEL messages: the key cp:{sN}:ep:{ep} of an
//	                            endpoint whose gate just changed, published
//	                            by the script that changed it (lib.lua
//	                            gate_changed, once per script through
//	                            gate_publish) or after Enable/ResetBreaker;
//	                            every replica's gate cache subscribes
//	                            (proxy/redisstore/gatecache).
//	cp:wake               CHANNEL messages: a callout id or endpoint name
//	                            that became due now — the first due callout
//	                            of an empty queue (create.lua), reaped
//	                            leases (Reap), released held callouts —
//	                            published so idle dispatchers wake
//	                            (proxy/redisstore/wake).
package keyspace

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

const (
	// Prefix starts every key.
	Prefix = "cp:"
	// Shards is the number of endpoint shards (hash tags {s0} … {s127}).
	Shards = 128
	// IDLen is the length of a callout id: two hex digits of the shard and
	// 22 base64url characters of 16 random bytes.
	IDLen = 24
	// ClusterSlots is the number of Redis Cluster hash slots.
	ClusterSlots = 16384
)

// Keys and channels that are not per shard.
const (
	Endpoints   = Prefix + "endpoints"    // SET of endpoint names seen
	Issuers     = Prefix + "iss"          // HASH issuer tag -> issuer
	Layout      = Prefix + "layout"       // STRING layout version
	GateChannel = Prefix + "gate"         // CHANNEL endpoint hash keys whose gate changed
	WakeChannel = Prefix + "wake"         // CHANNEL callout ids / endpoints due now
	SFPause     = Prefix + "sf:pause"     // STRING Salesforce writes paused until (ms)
	SFPauseWhy  = Prefix + "sf:pause:why" // STRING why they are paused (api_limit, storage_limit)
	SFFlush     = Prefix + "sf:flush"     // STRING the Salesforce flush lease
	SFDefer     = Prefix + "sf:defer"     // HASH deferrals of Salesforce writes by scope
	Jobs        = Prefix + "jobs"         // ZSET job id -> created ms
	JobsActive  = Prefix + "jobs:active"  // SET ids of jobs not ended
	Ack         = Prefix + "ack"          // STRING durable acknowledgement rounds
)

// AckFor returns the acknowledgement counter of the Redis Cluster node
// that owns key's slot, cp:{tag}:ack (STRING, no TTL): INCRed by every
// durable acknowledgement round on that node (proxy/redisstore/durable),
// in key's hash tag so it hashes to key's slot. A key without a hash tag
// is used as the tag ({key} hashes as key does).
func AckFor(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return Prefix + key[i:i+j+2] + ":ack"
		}
	}
	return Prefix + "{" + key + "}:ack"
}

// Tag returns the hash tag of shard n, e.g. "{s17}".
func Tag(n int) string { return "{s" + strconv.Itoa(n) + "}" }

// ShardPrefix returns the prefix of every key of shard n, "cp:{sN}:".
func ShardPrefix(n int) string { return Prefix + Tag(n) + ":" }

// ShardOf returns the shard (0 … Shards-1) of an endpoint:
// crc32.ChecksumIEEE(endpoint) % Shards.
func ShardOf(endpoint string) int {
	return int(crc32.ChecksumIEEE([]byte(endpoint)) % Shards)
}

// Endpoint returns the endpoint hash cp:{sN}:ep:{ep} of endpoint, in its
// home shard.
func Endpoint(endpoint string) string { return ShardPrefix(ShardOf(endpoint)) + "ep:" + endpoint }

// NewCalloutID returns a fresh callout id for endpoint: two lowercase hex
// digits of the endpoint's shard followed by base64url (RFC 4648 §5, no
// padding) of 16 bytes read from rnd — 128 random bits, URL-safe, IDLen (24)
// characters (contract §2 "Callout-Id"). The shard prefix lets
// GET /v1/callouts/{id} find the record from the id alone. It returns an
// error only when rnd fails.
func NewCalloutID(endpoint string, rnd io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("keyspace: callout id: %w", err)
	}
	return fmt.Sprintf("%02x", ShardOf(endpoint)) + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ShardOfID returns the shard encoded in a callout id, and false when id is
// not shaped like one NewCalloutID makes (length, lowercase hex shard below
// Shards, canonical base64url of 16 bytes).
func ShardOfID(id string) (int, bool) {
	if len(id) != IDLen {
		return 0, false
	}
	for _, c := range id[:2] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(id[:2], 16, 8)
	if err != nil || n >= Shards {
		return 0, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(id[2:])
	if err != nil || len(b) != 16 {
		return 0, false
	}
	return int(n), true
}

// Callout returns the record key cp:{sN}:c:{id} of a callout id, and false
// when the id is malformed.
func Callout(id string) (string, bool) {
	n, ok := ShardOfID(id)
	if !ok {
		return "", false
	}
	return ShardPrefix(n) + "c:" + id, true
}

// RecordParts returns a record key and its :q and :r keys.
func RecordParts(record string) []string {
	return []string{record, record + ":q", record + ":r"}
}

// IssuerTag is the short tag of a caller organisation (JWT issuer) in the
// endpoint hash's per-issuer backlog counters ('ii:' items, 'ib:' bytes)
// and the record's 'i' field: 11 base64url characters (66 bits) of
// sha256(issuer), "" for no issuer.
func IssuerTag(issuer string) string {
	if issuer == "" {
		return ""
	}
	h := sha256.Sum256([]byte(issuer))
	return base64.RawURLEncoding.EncodeToString(h[:])[:11]
}

// PartitionGate returns the name of the gate a request of issuer meets at
// endpoint (contract §6 breaker partitions): "endpoint/issuer", or
// endpoint when issuer is "". The store's read-side calls (Admit,
// RecordResult, ReadGates) and the gate cache take such names; the store
// applies the issuer's partition only where the endpoint's breaker is
// partitioned by organisation. Endpoint names never hold '/'.
func PartitionGate(endpoint, issuer string) string {
	if issuer == "" {
		return endpoint
	}
	return endpoint + "/" + issuer
}

// SplitGate splits a gate name of PartitionGate into its endpoint and
// issuer ("" when it has none).
func SplitGate(name string) (endpoint, issuer string) {
	endpoint, issuer, _ = strings.Cut(name, "/")
	return endpoint, issuer
}

// Lock returns the key of the replica-wide lock name, cp:lock:{name}.
func Lock(name string) string { return Prefix + "lock:" + name }

// Outbox are the Salesforce outbox keys of one shard.
type Outbox struct {
	Due    string // cp:{sN}:sfo   ZSET entry -> due ms (lease expiry while claimed)
	Data   string // cp:{sN}:sfo:d HASH p:/n:/e: fields per entry
	Expiry string // cp:{sN}:sfx   ZSET dead-letter copy id -> record TTL end ms
	State  string // cp:{sN}:sfs   HASH Failed_Callout__c record state by root
}

// OutboxOf returns the outbox keys of shard n.
func OutboxOf(n int) Outbox {
	t := ShardPrefix(n)
	return Outbox{Due: t + "sfo", Data: t + "sfo:d", Expiry: t + "sfx", State: t + "sfs"}
}

// SFWatermark returns the key of a Salesforce poll's watermark,
// cp:sf:wm:{name}.
func SFWatermark(name string) string { return Prefix + "sf:wm:" + name }

// SFReprocess returns the key of a reprocess request from Salesforce,
// cp:sf:rq:{root}:{ms}: the record of root seen as Reprocess Requested with
// SystemModstamp stampMs (Unix ms).
func SFReprocess(root string, stampMs int64) string {
	return Prefix + "sf:rq:" + root + ":" + strconv.FormatInt(stampMs, 10)
}

// SFSubLease returns the key of the Pub/Sub subscriber lease of topic,
// cp:{sfsub}:lease:{topic}.
func SFSubLease(topic string) string { return Prefix + "{sfsub}:lease:" + topic }

// SFSubReplay returns the key of the stored replay id of topic,
// cp:{sfsub}:replay:{topic}; it shares SFSubLease's slot.
func SFSubReplay(topic string) string { return Prefix + "{sfsub}:replay:" + topic }

// SFSubAgain returns the key of the reprocess requests the subscriber of
// topic deferred, cp:{sfsub}:again:{topic}; it shares SFSubLease's slot.
func SFSubAgain(topic string) string { return Prefix + "{sfsub}:again:" + topic }

// Job are the three keys of one replay job, hash-tagged by the job id.
type Job struct {
	Hash, Items, Queue string
}

// JobOf returns the keys of job id.
func JobOf(id string) Job {
	j := Prefix + "job:{" + id + "}"
	return Job{Hash: j, Items: j + ":items", Queue: j + ":queue"}
}

// All returns the job's keys in the order its scripts take them.
func (k Job) All() []string { return []string{k.Hash, k.Items, k.Queue} }

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), the checksum Redis
// Cluster maps keys to slots with (Redis Cluster specification, "Keys
// distribution model").
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// Slot is the Redis Cluster slot of a key (0 … 16383), honouring a
// {hash tag}: the part between the first '{' and the next '}' when that is
// not empty.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16([]byte(key)) % ClusterSlots)
}
