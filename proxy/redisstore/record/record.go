// Package record is the codec of a callout record, the hash cp:{sN}:c:{id}
// (keyspace; written and read by the core store's scripts, lua/lib.lua):
// its one-letter fields, the packed meta and rest only Go reads, the attempt
// entries and the stored response. It is pure: no Redis, no clock.
package record

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Fields of the callout record cp:{sN}:c:{id} (keyspace, lua/lib.lua): one
// hash with one-letter fields, every value at most chunkLen bytes, so that Redis
// keeps it in its compact listpack encoding (hash-max-listpack-value 64 by
// default). The request is packed by this file into two values that only
// Go reads: the meta (method, endpoint, path, query, key, source record,
// created time), kept after the callout ends, and the rest (headers and
// body), dropped when it ends succeeded or failed (contract §5).
const (
	FieldState    = "S" // state code, stateCode
	FieldAttempts = "n" // attempts made, integer; absent: 0
	FieldIssuer   = "i" // issuer tag (issuerTag); the issuer itself: cp:iss
	FieldCharged  = "b" // bytes charged to the backlog (pending and dead letters)
	fieldMeta     = "m" // packed meta, chunked: m, m2, m3, m4 (or one long m); the rest: 1 … 8
	FieldRestInQ  = "Q" // "1": the packed rest is the string :q, not chunks 1…4
	FieldReplayOf = "o" // replay_of callout id
	FieldFirst    = "a" // first attempt ms
	FieldToken    = "t" // lease token (in flight)
	FieldLeaseTo  = "x" // lease expiry ms (in flight)
	FieldLeaseAt  = "l" // lease start ms (in flight)
	FieldKind     = "k" // kind code of the current claim (in flight)
	FieldSched    = "d" // "1" once a dispatcher claimed it (contract §8 events)
	FieldAttempt  = "A" // A<n>: attempt n, "kind started dur status outcome error"
	FieldStatus   = "R" // last response status; the response: r1 … r4 (respField) or key :r
	FieldLastErr  = "e" // last error
	FieldFinished = "F" // finished ms
	FieldReason   = "D" // dead-letter reason
	FieldAckHold  = "w" // ms: its durable acknowledgement is out until then (create.lua); hold/lua/park.lua leaves it held
)

// chunkLen is the longest value a record stores in one field.
const chunkLen = 64

// maxInlineChunks is how many chunks of the meta a record holds inline (a
// longer meta is one long field: the hash leaves listpack encoding,
// correctness unchanged); maxRestChunks how many of the rest (headers and
// body: a longer one goes to the key :q).
const (
	maxInlineChunks = 4
	maxRestChunks   = 8
)

var stateCode = map[policy.State]string{
	policy.Scheduled: "s", policy.Held: "h", policy.InFlight: "f", policy.Succeeded: "o",
	policy.Failed: "x", policy.DeadLettered: "d",
}

// stateOfCode reads stateCode back, and "g" as held too: a held callout
// whose own due time is later than its gate's reopening, which a release
// leaves at that time (lua/lib.lua holds).
var stateOfCode = func() map[string]policy.State {
	m := map[string]policy.State{"g": policy.Held}
	for s, c := range stateCode {
		m[c] = s
	}
	return m
}()

var kindOfCode = map[string]policy.Kind{
	"f": policy.KindFirst, "r": policy.KindRetry, "p": policy.KindProbe, "y": policy.KindReplay,
}

// Method codes of the packed meta; any other method is written out.
var methodCode = map[string]byte{
	http.MethodGet: 'G', http.MethodPost: 'P', http.MethodPut: 'U', http.MethodPatch: 'A',
	http.MethodDelete: 'D', http.MethodHead: 'H', http.MethodOptions: 'O',
}

// Header names and values common in Apex callouts get one-byte codes in
// the packed rest (1 … len); 0 means written out. Append only: the codes
// are stored.
var (
	headerNames = []string{"Content-Type", "Accept", "User-Agent", "Accept-Encoding",
		"Accept-Language", "Cache-Control", "Pragma", "Content-Encoding", "Traceparent",
		"Tracestate", "X-Request-Id", "If-Match", "If-None-Match", "Content-Language"}
	headerValues = []string{"application/json", "application/json; charset=UTF-8",
		"application/json;charset=UTF-8", "text/plain", "text/xml", "application/xml",
		"application/x-www-form-urlencoded", "*/*", "no-cache", "gzip",
		"text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2", "text/plain; charset=UTF-8"}
	headerNameCode  = codes(headerNames)
	headerValueCode = codes(headerValues)
)

func codes(list []string) map[string]byte {
	m := make(map[string]byte, len(list))
	for i, s := range list {
		m[s] = byte(i + 1)
	}
	return m
}

// Meta is what the packed meta holds.
type Meta struct {
	Method, Endpoint, Path, Query, Key, Source string
	Created                                    time.Time
	// Trace is the W3C trace context it was accepted under
	// (policy.NewCallout.TraceContext).
	Trace string
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// packMeta packs m: a method code (or 0 and the method), then the
// length-prefixed endpoint, path, query, key and source, the created time
// in Unix ms as a uvarint, then the length-prefixed trace context
// (packTrace).
func packMeta(m Meta) string {
	b := make([]byte, 0, 16+len(m.Endpoint)+len(m.Path)+len(m.Query)+len(m.Key)+len(m.Source))
	if c, ok := methodCode[m.Method]; ok {
		b = append(b, c)
	} else {
		b = appendStr(append(b, 0), m.Method)
	}
	for _, s := range []string{m.Endpoint, m.Path, m.Query, m.Key, m.Source} {
		b = appendStr(b, s)
	}
	b = binary.AppendUvarint(b, uint64(max(m.Created.UnixMilli(), 0)))
	return string(appendStr(b, packTrace(m.Trace)))
}

// packTrace packs a trace context "traceparent[,tracestate]": a version-00
// traceparent (W3C Trace Context §3.2: 00-<32 hex>-<16 hex>-<2 hex>) as
// 1, its 16 + 8 + 1 bytes and the rest as it is (26 bytes instead of 55);
// anything else as 0 and itself; "" as "".
func packTrace(tc string) string {
	if tc == "" {
		return ""
	}
	if len(tc) >= 55 && tc[:3] == "00-" && tc[35] == '-' && tc[52] == '-' && (len(tc) == 55 || tc[55] == ',') {
		raw, err := hex.DecodeString(tc[3:35] + tc[36:52] + tc[53:55])
		if err == nil && hex.EncodeToString(raw) == tc[3:35]+tc[36:52]+tc[53:55] {
			return "\x01" + string(raw) + tc[55:]
		}
	}
	return "\x00" + tc
}

func unpackTrace(p string) string {
	switch {
	case p == "":
		return ""
	case p[0] == 1 && len(p) >= 26:
		h := hex.EncodeToString([]byte(p[1:26]))
		return "00-" + h[:32] + "-" + h[32:48] + "-" + h[48:50] + p[26:]
	default:
		return p[1:]
	}
}

var errPacked = errors.New("malformed packed record")

// unpacker reads what packMeta and packRest wrote.
type unpacker struct {
	b   string
	err error
}

func (u *unpacker) uvarint() uint64 {
	if u.err != nil {
		return 0
	}
	v, n := binary.Uvarint([]byte(u.b[:min(len(u.b), binary.MaxVarintLen64)]))
	if n <= 0 {
		u.err = errPacked
		return 0
	}
	u.b = u.b[n:]
	return v
}

func (u *unpacker) str() string {
	n := u.uvarint()
	if u.err != nil || n > uint64(len(u.b)) {
		u.err = errPacked
		return ""
	}
	s := u.b[:n]
	u.b = u.b[n:]
	return s
}

func (u *unpacker) byte() byte {
	if u.err != nil || len(u.b) == 0 {
		u.err = errPacked
		return 0
	}
	c := u.b[0]
	u.b = u.b[1:]
	return c
}

// MetaOf unpacks the meta of record fields m (its chunks joined); a
// malformed or missing meta is an error.
func MetaOf(m map[string]string) (Meta, error) { return unpackMeta(joinChunks(m, metaField)) }

// InlineResponse is the last response as the record holds it inline (its
// chunks r1 … r4 joined; DecodeResponse reads it), "" when it has none or the
// response is in the key :r.
func InlineResponse(m map[string]string) string { return joinChunks(m, respField) }

// StateCode is the code the field FieldState holds for state st ("" for a
// state no record holds).
func StateCode(st policy.State) string { return stateCode[st] }

// StateOfCode is the state whose code field FieldState holds ("" for an
// unknown code).
func StateOfCode(code string) policy.State { return stateOfCode[code] }

func unpackMeta(s string) (Meta, error) {
	u := &unpacker{b: s}
	var m Meta
	if c := u.byte(); c != 0 {
		for name, code := range methodCode {
			if code == c {
				m.Method = name
			}
		}
	} else {
		m.Method = u.str()
	}
	m.Endpoint, m.Path, m.Query, m.Key, m.Source = u.str(), u.str(), u.str(), u.str(), u.str()
	if ms := u.uvarint(); ms > 0 {
		m.Created = time.UnixMilli(int64(ms))
	}
	m.Trace = unpackTrace(u.str())
	if u.err == nil && m.Method == "" {
		u.err = errPacked
	}
	return m, u.err
}

// packRest packs the request's headers and body: the count of header
// fields, each as a name code (or 0 and the name), its count of values and
// each value as a code (or 0 and the value), then the body to the end.
// Names are canonical (http.CanonicalHeaderKey).
func packRest(h http.Header, body []byte) string {
	names := make([]string, 0, len(h))
	for name, vs := range h {
		if len(vs) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names) // deterministic, so equal requests pack alike
	b := binary.AppendUvarint(make([]byte, 0, 8+len(body)+32*len(names)), uint64(len(names)))
	for _, name := range names {
		cn := http.CanonicalHeaderKey(name)
		if c, ok := headerNameCode[cn]; ok {
			b = append(b, c)
		} else {
			b = appendStr(append(b, 0), cn)
		}
		b = binary.AppendUvarint(b, uint64(len(h[name])))
		for _, v := range h[name] {
			if c, ok := headerValueCode[v]; ok {
				b = append(b, c)
			} else {
				b = appendStr(append(b, 0), v)
			}
		}
	}
	return string(append(b, body...))
}

func unpackRest(s string) (http.Header, []byte, error) {
	u := &unpacker{b: s}
	n := u.uvarint()
	var h http.Header
	for i := uint64(0); i < n && u.err == nil; i++ {
		var name string
		if c := u.byte(); c == 0 {
			name = u.str()
		} else if int(c) <= len(headerNames) {
			name = headerNames[c-1]
		} else {
			u.err = errPacked
		}
		nv := u.uvarint()
		if nv > uint64(len(u.b)) {
			u.err = errPacked
		}
		vs := make([]string, 0, min(nv, 64))
		for j := uint64(0); j < nv && u.err == nil; j++ {
			if c := u.byte(); c == 0 {
				vs = append(vs, u.str())
			} else if int(c) <= len(headerValues) {
				vs = append(vs, headerValues[c-1])
			} else {
				u.err = errPacked
			}
		}
		if h == nil {
			h = http.Header{}
		}
		h[name] = vs
	}
	if u.err != nil {
		return nil, nil, u.err
	}
	var body []byte
	if len(u.b) > 0 {
		body = []byte(u.b)
	}
	return h, body, nil
}

// chunkFields returns the field/value pairs holding v in chunks of
// chunkLen: names(1), names(2), …; one long field when v needs more than
// most chunks.
func chunkFields(v string, name func(int) string, most int) []string {
	if len(v) > most*chunkLen {
		return []string{name(1), v}
	}
	var out []string
	for i := 1; len(v) > 0; i++ {
		n := min(len(v), chunkLen)
		out = append(out, name(i), v[:n])
		v = v[n:]
	}
	return out
}

func metaField(i int) string {
	if i == 1 {
		return fieldMeta
	}
	return fieldMeta + strconv.Itoa(i)
}

func restField(i int) string { return strconv.Itoa(i) }

// respField names the inline chunks of the last response: r1 … r4.
func respField(i int) string { return "r" + strconv.Itoa(i) }

// joinChunks reassembles what chunkFields split, from a record's fields.
func joinChunks(m map[string]string, name func(int) string) string {
	var b strings.Builder
	for i := 1; ; i++ {
		v, ok := m[name(i)]
		if !ok {
			return b.String()
		}
		b.WriteString(v)
	}
}

// EncodeAttempt is an attempt entry (A<n>): "kind started_ms
// duration_ms status outcome error", error last (it may hold spaces). The
// reaper writes the same form (lua/reap.lua).
func EncodeAttempt(a policy.Attempt) string {
	return string(a.Kind) + " " + strconv.FormatInt(a.StartedAt.UnixMilli(), 10) + " " +
		strconv.FormatInt(a.Duration.Milliseconds(), 10) + " " + strconv.Itoa(a.Status) + " " +
		string(a.Outcome) + " " + a.Error
}

// DecodeAttempt reads entry s of attempt n (EncodeAttempt's form); a
// malformed entry is an error.
func DecodeAttempt(n int, s string) (policy.Attempt, error) {
	p := strings.SplitN(s, " ", 6)
	if len(p) < 5 {
		return policy.Attempt{}, errPacked
	}
	started, err1 := strconv.ParseInt(p[1], 10, 64)
	dur, err2 := strconv.ParseInt(p[2], 10, 64)
	status, err3 := strconv.Atoi(p[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return policy.Attempt{}, errPacked
	}
	a := policy.Attempt{N: n, Kind: policy.Kind(p[0]), StartedAt: time.UnixMilli(started),
		Duration: time.Duration(dur) * time.Millisecond, Status: status, Outcome: policy.Outcome(p[4])}
	if len(p) == 6 {
		a.Error = p[5]
	}
	return a, nil
}

// attemptsOf collects the A<n> fields of a record in order of n.
func attemptsOf(m map[string]string) ([]policy.Attempt, error) {
	var out []policy.Attempt
	for f, v := range m {
		ns, ok := strings.CutPrefix(f, FieldAttempt)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(ns)
		if err != nil {
			continue
		}
		a, err := DecodeAttempt(n, v)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out, nil
}

// Overhead is what one pending callout costs Redis besides its record's
// field names and values, in bytes: its key names, the record's per-key
// and per-field overhead, its due or lease entry, its reservation — a
// round figure of TestPendingCalloutMemory's measure (proxy/redisstore,
// used_memory on the real single node), so that the backlog byte caps
// (contract §10) count what Redis really holds.
const Overhead = 256

// Charge is the bytes a new callout is charged in the backlog counters
// (field FieldCharged; create.lua adds it, the script that ends it
// releases it): Overhead, its record's fields (names and values, as New
// returns them) and its packed rest when that goes to :q.
func Charge(fields []string, restQ string) int64 {
	n := int64(Overhead + len(restQ))
	for _, f := range fields {
		n += int64(len(f))
	}
	return n
}

// New returns the record fields of a new callout as HSET
// pairs, and its packed rest when that goes to :q ("" when inline). Charge
// (FieldCharged, Charge) and issuer tag are the caller's to add, the
// state the script's.
func New(nc policy.NewCallout, now time.Time) (fields []string, restQ string) {
	fields = chunkFields(packMeta(Meta{Method: nc.Method, Endpoint: nc.Endpoint, Path: nc.Path,
		Query: nc.Query, Key: nc.IdempotencyKey, Source: nc.SourceRecord, Created: now,
		Trace: nc.TraceContext}), metaField, maxInlineChunks)
	rest := packRest(nc.Header, nc.Body)
	if len(rest) > maxRestChunks*chunkLen {
		restQ = rest
	} else {
		fields = append(fields, chunkFields(rest, restField, maxRestChunks)...)
	}
	if nc.ReplayOf != "" {
		fields = append(fields, FieldReplayOf, nc.ReplayOf)
	}
	return fields, restQ
}

// Decode decodes the fields m of a record; rest is its :q
// (when m says it has one; "" otherwise).
func Decode(id string, m map[string]string, rest string, issuer func(tag string) string) (*policy.Callout, error) {
	meta, err := unpackMeta(joinChunks(m, metaField))
	if err != nil {
		return nil, errors.New("callout " + id + ": meta: " + err.Error())
	}
	if m[FieldRestInQ] != "1" {
		rest = joinChunks(m, restField)
	}
	c := &policy.Callout{
		ID: id, Endpoint: meta.Endpoint, Method: meta.Method, Path: meta.Path, Query: meta.Query,
		IdempotencyKey: meta.Key, SourceRecord: meta.Source, CreatedAt: meta.Created,
		State: stateOfCode[m[FieldState]], Attempts: atoi(m[FieldAttempts]),
		FirstAttemptAt: ParseMs(m[FieldFirst]), LeaseExpiresAt: ParseMs(m[FieldLeaseTo]),
		FinishedAt: ParseMs(m[FieldFinished]), ReplayOf: m[FieldReplayOf], LastError: m[FieldLastErr],
		DeadLetterReason: policy.DeadLetterReason(m[FieldReason]), TraceContext: meta.Trace,
	}
	if tag := m[FieldIssuer]; tag != "" {
		c.Issuer = issuer(tag)
	}
	if rest != "" {
		if c.Header, c.Body, err = unpackRest(rest); err != nil {
			return nil, errors.New("callout " + id + ": request: " + err.Error())
		}
		// The record keeps no fingerprint (its reservation keeps the first
		// 96 bits, for idempotent replay); while it has the request, it is
		// derived.
		c.Fingerprint = policy.Fingerprint(c.Method, c.Path, c.Query, c.Body)
	}
	if c.AttemptLog, err = attemptsOf(m); err != nil {
		return nil, errors.New("callout " + id + ": attempt log: " + err.Error())
	}
	return c, nil
}

// encodeHeader returns JSON for a response header ("" when empty).
func encodeHeader(h http.Header) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	b, err := json.Marshal(h)
	return string(b), err
}

func decodeHeader(s string) (http.Header, error) {
	if s == "" {
		return nil, nil
	}
	var h http.Header
	err := json.Unmarshal([]byte(s), &h)
	return h, err
}

// EncodeResponse is the stored form of a response (key :r):
// "status cut\n" + header JSON + "\n" + body, cut being 0 or 1.
func EncodeResponse(r *policy.Response, body []byte, cut bool) ([]byte, error) {
	h, err := encodeHeader(r.Header)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(h)+len(body)+16)
	out = strconv.AppendInt(out, int64(r.Status), 10)
	out = append(out, ' ', '0'+flagByte(cut), '\n')
	out = append(append(out, h...), '\n')
	return append(out, body...), nil
}

// DecodeResponse reads EncodeResponse's form; a malformed one is an error.
func DecodeResponse(b string) (*policy.Response, error) {
	head, rest, ok1 := strings.Cut(b, "\n")
	h, body, ok2 := strings.Cut(rest, "\n")
	status, cut, ok3 := strings.Cut(head, " ")
	n, err := strconv.Atoi(status)
	if !ok1 || !ok2 || !ok3 || err != nil {
		return nil, fmt.Errorf("malformed stored response")
	}
	r := &policy.Response{Status: n, Truncated: cut == "1", Body: []byte(body)}
	if r.Header, err = decodeHeader(h); err != nil {
		return nil, err
	}
	return r, nil
}

func flagByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// FormatMs formats t as Unix ms, "0" for the zero time: the form every time
// of a record takes.
func FormatMs(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// ParseMs parses Unix ms; "", "0" and anything not a number are the zero time.
func ParseMs(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
