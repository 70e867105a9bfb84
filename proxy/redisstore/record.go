package redisstore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Fields of the callout hash cp:{sN}:c:{id}. Names are short and values
// small because a pending callout's memory is budgeted (< 1 KiB besides its
// body); an empty value is never stored. Times are Unix ms in decimal.
const (
	fID          = "id" // callout id
	fEndpoint    = "ep" // endpoint name
	fIssuer      = "is" // caller's JWT issuer
	fMethod      = "m"  // HTTP method
	fPath        = "p"  // path below the endpoint's base URL, with leading "/"
	fQuery       = "q"  // raw query, without "?"
	fKey         = "k"  // Idempotency-Key
	fFingerprint = "fp" // Fingerprint(method, path, query, body)
	fSource      = "sr" // Callout-Source-Record
	fState       = "s"  // State
	fAttempts    = "n"  // attempts made (dispatches), integer
	fCreated     = "ct" // created ms
	fFirst       = "fa" // first attempt ms
	fNext        = "na" // next attempt ms (scheduled, held)
	fLeaseUntil  = "lx" // lease expiry ms (in_flight; the lease ZSET is authoritative)
	fFinished    = "ft" // finished ms
	fReplayOf    = "ro" // replay_of callout id
	fRespStatus  = "rs" // last response status (the response itself: key :r)
	fLastError   = "le" // last error text
	fReason      = "dr" // dead-letter reason
	fToken       = "lt" // lease token of the current claim (in_flight only)
	fLeaseStart  = "ls" // ms the current claim started (in_flight only)
	fLeaseKind   = "lk" // Kind of the current claim (in_flight only)
	// fScheduled is "1" once a dispatcher claimed the callout (claim.lua):
	// it was scheduled or held, not only synchronous, so its ending
	// publishes a Callout_Result__e (contract §8; complete.lua, outbox.go).
	fScheduled = "sd"
	// fTrace is the W3C trace context the callout was accepted under
	// (policy.NewCallout.TraceContext: traceparent[,tracestate], at most
	// 312 bytes): written by begin and enqueue with the request's fields,
	// returned by claim and get; counted in the backlog bytes like them.
	fTrace = "tc"
	// fHeaderPrefix + canonical name: one request header, its values joined
	// by "\n" (which no header value can contain, RFC 9110 §5.5).
	fHeaderPrefix = "h:"
)

// Fields of the endpoint hash cp:{sN}:ep:{ep}. Absent means zero/false.
const (
	eBreaker    = "bs"  // "open" or absent (closed); half_open = open and now >= pa
	eFailures   = "cf"  // consecutive counting failures
	eOpenedAt   = "oa"  // ms the breaker opened, written once by the opener
	eProbeAt    = "pa"  // ms the open breaker admits its probe
	eProbeToken = "pt"  // lease token of the callout (or read) holding the probe
	eProbeUntil = "pe"  // ms the probe token expires
	ePaused     = "pu"  // ms until which the endpoint is paused (429 Retry-After)
	eDisabled   = "dis" // "1" when disabled
	eDisReason  = "dr"  // why it was disabled
	eDisAt      = "dat" // ms it was disabled
	eLastOK     = "lsu" // ms of the success that last ended a failure streak
	eOutage     = "os"  // ms of the first counting failure after a success
	eNotified   = "on"  // "1" once the owner heard of the current outage
	eBytes      = "bb"  // bytes charged by pending callouts and dead letters
	eShards     = "sq"  // shard counts the endpoint was served with, "1,3" (shards.go)
	// eLegacy is "0" once the dispatcher saw the endpoint's legacy due and
	// lease sets empty: create.lua stops counting them (keys.go).
	eLegacy = "L"
	// eLegacyUntil is the time (ms) after which no legacy reservation can
	// exist any more: create.lua stops looking them up then (claim.go).
	eLegacyUntil = "Lr"
)

// attemptJSON is the stored form of an Attempt.
type attemptJSON struct {
	N          int            `json:"n"`
	Kind       policy.Kind    `json:"kind"`
	StartedAt  int64          `json:"started_at"`
	DurationMs int64          `json:"duration_ms"`
	Status     int            `json:"status,omitempty"`
	Outcome    policy.Outcome `json:"outcome"`
	Error      string         `json:"error,omitempty"`
}

func encodeAttempt(a policy.Attempt) (string, error) {
	b, err := json.Marshal(attemptJSON{
		N: a.N, Kind: a.Kind, StartedAt: a.StartedAt.UnixMilli(), DurationMs: a.Duration.Milliseconds(),
		Status: a.Status, Outcome: a.Outcome, Error: a.Error,
	})
	return string(b), err
}

// decodeAttempts parses the attempt log (key :l), one JSON object a line.
func decodeAttempts(s string) ([]policy.Attempt, error) {
	var out []policy.Attempt
	for line := range strings.SplitSeq(s, "\n") {
		if line == "" {
			continue
		}
		var a attemptJSON
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			return nil, err
		}
		out = append(out, policy.Attempt{
			N: a.N, Kind: a.Kind, StartedAt: time.UnixMilli(a.StartedAt),
			Duration: time.Duration(a.DurationMs) * time.Millisecond,
			Status:   a.Status, Outcome: a.Outcome, Error: a.Error,
		})
	}
	return out, nil
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

// encodeResponse is the stored form of a response (key :r):
// "status cut\n" + header JSON + "\n" + body, cut being 0 or 1.
func encodeResponse(r *policy.Response, body []byte, cut bool) ([]byte, error) {
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

func decodeResponse(b string) (*policy.Response, error) {
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

// ms formats t as Unix ms, "0" for the zero time.
func ms(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// fromMs parses Unix ms; "" and "0" are the zero time.
func fromMs(s string) time.Time {
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

// requestFields returns the immutable request fields of a new callout as
// HSET pairs, leaving empty ones out. The body is not among them (key :b).
func requestFields(id string, nc policy.NewCallout, fp string, now time.Time) []any {
	pairs := []struct{ f, v string }{
		{fID, id}, {fEndpoint, nc.Endpoint}, {fIssuer, nc.Issuer}, {fMethod, nc.Method},
		{fPath, nc.Path}, {fQuery, nc.Query}, {fKey, nc.IdempotencyKey}, {fFingerprint, fp},
		{fSource, nc.SourceRecord}, {fReplayOf, nc.ReplayOf}, {fCreated, ms(now)},
		{fTrace, nc.TraceContext},
	}
	out := make([]any, 0, 2*(len(pairs)+len(nc.Header)))
	for _, p := range pairs {
		if p.v != "" {
			out = append(out, p.f, p.v)
		}
	}
	for name, vs := range nc.Header {
		if len(vs) > 0 {
			out = append(out, fHeaderPrefix+http.CanonicalHeaderKey(name), strings.Join(vs, "\n"))
		}
	}
	return out
}

// storedParts are the four stored parts of a callout (keys.go).
type storedParts struct {
	hash map[string]string
	body []byte
	log  string
	resp string // "" when none
}

// decodeCallout turns the stored parts of a callout into a Callout.
func decodeCallout(p storedParts) (*policy.Callout, error) {
	m := p.hash
	c := &policy.Callout{
		ID: m[fID], Endpoint: m[fEndpoint], Issuer: m[fIssuer], Method: m[fMethod],
		Path: m[fPath], Query: m[fQuery], IdempotencyKey: m[fKey], Fingerprint: m[fFingerprint],
		SourceRecord: m[fSource], State: policy.State(m[fState]), Attempts: atoi(m[fAttempts]),
		CreatedAt: fromMs(m[fCreated]), FirstAttemptAt: fromMs(m[fFirst]),
		NextAttemptAt: fromMs(m[fNext]), LeaseExpiresAt: fromMs(m[fLeaseUntil]),
		FinishedAt: fromMs(m[fFinished]), ReplayOf: m[fReplayOf], LastError: m[fLastError],
		DeadLetterReason: policy.DeadLetterReason(m[fReason]), Header: headerOf(m), Body: p.body,
		TraceContext: m[fTrace],
	}
	var err error
	if c.AttemptLog, err = decodeAttempts(p.log); err != nil {
		return nil, fmt.Errorf("redisstore: callout %s: attempt log: %w", c.ID, err)
	}
	if p.resp != "" {
		if c.Response, err = decodeResponse(p.resp); err != nil {
			return nil, fmt.Errorf("redisstore: callout %s: response: %w", c.ID, err)
		}
	}
	return c, nil
}

// headerOf collects the h:Name fields of a callout hash.
func headerOf(m map[string]string) http.Header {
	var h http.Header
	for f, v := range m {
		if name, ok := strings.CutPrefix(f, fHeaderPrefix); ok {
			if h == nil {
				h = http.Header{}
			}
			h[name] = strings.Split(v, "\n")
		}
	}
	return h
}
