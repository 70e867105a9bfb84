package sfemu

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsubapi"
)

// OrgID is the emulated org's id: the tenantid Pub/Sub API calls must
// carry, and the org segment of the token answer's identity URL.
const OrgID = "00DEMU000000001AAA"

// The Pub/Sub API as the emulator serves it (StartPubSub), each behaviour
// from the "Pub/Sub API Developer Guide"
// (https://developer.salesforce.com/docs/platform/pub-sub-api/overview):
//
//   - every RPC checks its metadata ("Include Authorization Headers in RPC
//     Method Calls"): accesstoken a token the emulator minted, instanceurl
//     its URL, tenantid OrgID; else UNAUTHENTICATED with the error code
//     sfdc.platform.eventbus.grpc.service.auth.error in the trailers
//     ("Handle Errors": the custom error code is in the trailers);
//   - Change Data Capture: a change of a record of an entity named in
//     PubSubOptions.Entities (the org's PlatformEventChannelMember of
//     ChangeEvents) publishes a change event on /data/{Entity}ChangeEvent
//     (X__c: /data/X__ChangeEvent) — a ChangeEventHeader (entityName,
//     recordIds, changeType CREATE or UPDATE, commitTimestamp, …) and the
//     record's fields: every field of a create, the changed fields of an
//     update, every other field null ("Change Event Body Fields", Change
//     Data Capture Developer Guide: in a Pub/Sub API event unchanged fields
//     are null). An update's changedFields and nulledFields are bitmaps,
//     as the Pub/Sub API sends them ("Event Deserialization
//     Considerations", Pub/Sub API Developer Guide: an array whose first
//     element is "0x" and the hex digits of a bitmap in which bit i stands
//     for the schema's field at position i); changedFields names the
//     fields set to null too, and is empty for a create ("ChangeEventHeader
//     Class", Apex Reference: "empty for other operations, including
//     record creation"); diffFields stays empty (the emulator sends no
//     text diffs). The emulator types every field as a nullable string;
//   - gap events (GapNext, PublishGap): a header with a GAP_ change type
//     and the record ids, every field null and no bitmaps ("Gap Events":
//     sent instead of a change event when one cannot be generated, e.g.
//     an internal error; the change type and record id in the header, no
//     record fields); GAP_OVERFLOW without record ids ("Overflow
//     Events"; both in the Change Data Capture Developer Guide);
//   - GetTopic ("GetTopic RPC Method"): the topic's name, can_subscribe,
//     its schema id; GetSchema ("GetSchema RPC Method"): the Avro schema
//     JSON of an id;
//   - Subscribe ("Subscribe RPC Method", "Pull Subscription and Flow
//     Control"): the first FetchRequest names the topic and the replay
//     preset — LATEST (events after the subscription), EARLIEST (every
//     retained event), CUSTOM (the events after replay_id); each
//     FetchRequest adds num_requested to the events pending delivery
//     (at most 100 in all); events are sent only while some are pending,
//     each FetchResponse saying how many still are
//     (pending_num_requested); with nothing new to send and events
//     pending, a keepalive FetchResponse with no events and the latest
//     replay id is sent every PubSubOptions.Keepalive; with none pending,
//     the client must send a FetchRequest within 60 seconds of the last
//     FetchResponse, else the server closes the stream (the emulator ends
//     the RPC OK: the page names no status)
//     ("Subscribe RPC Method", Subscribe Keepalive Behavior: "to keep the
//     subscription stream open, the client must send a new FetchRequest
//     within 60 seconds from when the last FetchResponse was sent");
//   - a CUSTOM replay id that is malformed, unknown or older than the
//     retention window (PubSubOptions.Retention, 72 hours by default:
//     "Event Message Durability") fails the call with INVALID_ARGUMENT and
//     the error code sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted
//     ("Retry Long-Lived RPC Calls After an Error Occurs": the replay id is
//     invalid, for instance outside the 72-hour retention period);
//   - a stream open for PubSubOptions.StreamLifetime (on the injected
//     clock) is closed by the server (the RPC ends OK), and CloseStreams
//     ends every stream with UNAVAILABLE: a client must be ready to subscribe again after the
//     last replay id it handled ("Retry Long-Lived RPC Calls After an
//     Error Occurs"; "Subscribe RPC Method", Subscribe Keepalive Behavior).
//
// Replay ids are 8 bytes, big-endian sequence numbers: opaque to clients.

// PubSubOptions configure the Pub/Sub API server.
type PubSubOptions struct {
	// Entities are the objects whose changes publish change events, e.g.
	// Failed_Callout__c. Each field of the object's Options.Objects entry
	// is in the event schema.
	Entities []string
	// Retention is how long events are kept. Default 72 hours.
	Retention time.Duration
	// StreamLifetime is how long a Subscribe stream stays open before the
	// server closes it. Default 5 minutes.
	StreamLifetime time.Duration
	// Keepalive is how often an idle stream with events pending gets an
	// empty FetchResponse. Default 270 seconds.
	Keepalive time.Duration
	// TLS serves the API over TLS (HTTP/2 with ALPN h2), as Salesforce
	// does ("Pub/Sub API Endpoint": api.pubsub.salesforce.com:7443), with
	// the certificate of the emulator's HTTPS side (Certificate, valid for
	// 127.0.0.1): a client that trusts the REST side trusts it too. False:
	// plaintext, dialled with insecure credentials.
	TLS bool
}

// PubSub is the emulator's Pub/Sub API server on a loopback port, over TLS
// with PubSubOptions.TLS, else plaintext (dial it with insecure
// credentials).
type PubSub struct {
	pubsubapi.UnimplementedPubSubServer
	s    *Server
	o    PubSubOptions
	addr string

	mu      sync.Mutex
	topics  map[string]*topic // by topic name
	byObj   map[string]*topic // by entity
	seq     uint64
	calls   map[string]int // RPCs received by method
	streams int            // Subscribe streams open
	pending int            // events the open streams asked for and were not sent (Pending)
	closeCh chan struct{}  // closed and replaced by CloseStreams
	presets []string       // the replay preset of every Subscribe set up or refused
	fails   int            // Subscribe calls still to refuse (FailSubscribes)
	gaps    int            // changes still to publish as gap events (GapNext)
	auths   []CallAuth     // the metadata of every call authenticated
}

// CallAuth is the authentication metadata of one Pub/Sub API call
// ("Include Authorization Headers in RPC Method Calls"): the headers
// accesstoken, instanceurl and tenantid.
type CallAuth struct{ AccessToken, InstanceURL, TenantID string }

// topic is one change event channel.
type topic struct {
	name, entity string
	schemaID     string
	schemaJSON   string
	schema       avro.Schema
	fields       []string
	events       []event
}

// event is one stored event.
type event struct {
	seq     uint64
	id      string
	payload []byte
	at      time.Time
}

// StartPubSub starts the Pub/Sub API server; it stops when the test ends.
func (s *Server) StartPubSub(t testing.TB, o PubSubOptions) *PubSub {
	t.Helper()
	if o.Retention <= 0 {
		o.Retention = 72 * time.Hour
	}
	if o.StreamLifetime <= 0 {
		o.StreamLifetime = 5 * time.Minute
	}
	if o.Keepalive <= 0 {
		o.Keepalive = 270 * time.Second
	}
	p := &PubSub{s: s, o: o, topics: map[string]*topic{}, byObj: map[string]*topic{}, calls: map[string]int{},
		closeCh: make(chan struct{})}
	for _, entity := range o.Entities {
		tp, err := newTopic(entity, sortedKeys(s.o.Objects[entity]))
		if err != nil {
			t.Fatal(err)
		}
		p.topics[tp.name], p.byObj[entity] = tp, tp
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = lis.Addr().String()
	var opts []grpc.ServerOption
	if o.TLS {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: s.TLS.Certificates,
			MinVersion: tls.VersionTLS12})))
	}
	g := grpc.NewServer(opts...)
	pubsubapi.RegisterPubSubServer(g, p)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	s.mu.Lock()
	s.pubsub = p
	s.mu.Unlock()
	return p
}

// Addr is the server's host:port.
func (p *PubSub) Addr() string { return p.addr }

// TopicOf returns the change event channel of an entity:
// /data/X__ChangeEvent for X__c, /data/XChangeEvent for a standard object
// ("Change Event Object Name").
func TopicOf(entity string) string {
	if base, ok := strings.CutSuffix(entity, "__c"); ok {
		return "/data/" + base + "__ChangeEvent"
	}
	return "/data/" + entity + "ChangeEvent"
}

// newTopic builds the change event channel of entity with its schema.
func newTopic(entity string, fields []string) (*topic, error) {
	name := TopicOf(entity)
	strs := map[string]any{"type": "array", "items": "string"}
	header := map[string]any{"type": "record", "name": "ChangeEventHeader", "namespace": "com.sforce.eventbus",
		"fields": []any{
			map[string]any{"name": "entityName", "type": "string"},
			map[string]any{"name": "recordIds", "type": strs},
			map[string]any{"name": "changeType", "type": map[string]any{"type": "enum", "name": "ChangeType",
				"namespace": "com.sforce.eventbus",
				"symbols":   []string{"CREATE", "UPDATE", "DELETE", "UNDELETE", "GAP_CREATE", "GAP_UPDATE", "GAP_DELETE", "GAP_UNDELETE", "GAP_OVERFLOW"}}},
			map[string]any{"name": "changeOrigin", "type": "string"},
			map[string]any{"name": "transactionKey", "type": "string"},
			map[string]any{"name": "sequenceNumber", "type": "int"},
			map[string]any{"name": "commitTimestamp", "type": "long"},
			map[string]any{"name": "commitNumber", "type": "long"},
			map[string]any{"name": "commitUser", "type": "string"},
			map[string]any{"name": "nulledFields", "type": strs},
			map[string]any{"name": "diffFields", "type": strs},
			map[string]any{"name": "changedFields", "type": strs},
		}}
	all := []any{map[string]any{"name": "ChangeEventHeader", "type": header}}
	for _, f := range fields {
		all = append(all, map[string]any{"name": f, "type": []any{"null", "string"}, "default": nil})
	}
	recName := strings.TrimPrefix(name, "/data/")
	doc, err := json.Marshal(map[string]any{"type": "record", "name": recName, "namespace": "com.sforce.eventbus",
		"fields": all})
	if err != nil {
		return nil, err
	}
	sc, err := avro.Parse(string(doc))
	if err != nil {
		return nil, fmt.Errorf("sfemu: change event schema of %s: %w", entity, err)
	}
	sum := sha256.Sum256(doc)
	return &topic{name: name, entity: entity, schemaID: hex.EncodeToString(sum[:11]), schemaJSON: string(doc),
		schema: sc, fields: fields}, nil
}

// Calls returns how many RPCs of a method ("Subscribe", "GetSchema",
// "GetTopic") the server received.
func (p *PubSub) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// Streams returns how many Subscribe streams are open and set up (their
// first FetchRequest was read).
func (p *PubSub) Streams() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streams
}

// Pending returns how many events the open Subscribe streams asked for
// and were not sent yet: the sum of their pending_num_requested as the
// server counts it, a FetchRequest counted once the stream took it in
// (not while it is on its way or queued). A
// stream with none pending is closed 60 s (on the injected clock) after
// its last FetchResponse (package comment), so a test that moves the
// clock that far while a stream should stay open first waits until the
// stream's next FetchRequest is counted here.
func (p *PubSub) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}

// Published returns how many change events were published on a topic.
func (p *PubSub) Published(topicName string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tp := p.topics[topicName]; tp != nil {
		return len(tp.events)
	}
	return 0
}

// CloseStreams ends every open Subscribe stream with UNAVAILABLE, as a
// server restart or a network failure does.
func (p *PubSub) CloseStreams() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.closeCh)
	p.closeCh = make(chan struct{})
}

// FailSubscribes makes the next n Subscribe calls fail with UNAVAILABLE,
// as when the service is down ("Handle Errors").
func (p *PubSub) FailSubscribes(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fails = n
}

// Presets returns the replay preset (LATEST, EARLIEST, CUSTOM) of every
// Subscribe call's first FetchRequest so far, in order.
func (p *PubSub) Presets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.presets...)
}

// Authenticated returns the metadata of every call the server accepted
// (authError passed: a token the emulator minted, its URL, OrgID), in
// order.
func (p *PubSub) Authenticated() []CallAuth {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]CallAuth(nil), p.auths...)
}

// replayID encodes a sequence number as a replay id.
func replayID(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// count notes one RPC of method.
func (p *PubSub) count(method string) {
	p.mu.Lock()
	p.calls[method]++
	p.mu.Unlock()
}

// withCode is a gRPC status error with the Pub/Sub API error code in the
// trailers ("Handle Errors").
func withCode(set func(metadata.MD) error, c codes.Code, errorCode, msg string) error {
	_ = set(metadata.Pairs("error-code", errorCode))
	return status.Error(c, msg)
}

// authError checks a call's metadata ("Include Authorization Headers in
// RPC Method Calls"); "" when it is good.
func (p *PubSub) authError(md metadata.MD) string {
	one := func(k string) string {
		if v := md.Get(k); len(v) == 1 {
			return v[0]
		}
		return ""
	}
	p.s.mu.Lock()
	valid := p.s.tokens[one("accesstoken")]
	p.s.mu.Unlock()
	switch {
	case !valid:
		return "accesstoken: invalid or expired session"
	case one("instanceurl") != p.s.URL:
		return "instanceurl: not this org's"
	case one("tenantid") != OrgID:
		return "tenantid: not this org's id"
	}
	p.mu.Lock()
	p.auths = append(p.auths, CallAuth{AccessToken: one("accesstoken"), InstanceURL: one("instanceurl"),
		TenantID: one("tenantid")})
	p.mu.Unlock()
	return ""
}
