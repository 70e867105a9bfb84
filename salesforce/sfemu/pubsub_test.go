package sfemu

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
	"github.com/calloutproxy/callout-proxy/salesforce/pubsubapi"
)

// psEnv is an emulator with the Pub/Sub API on, a session token minted
// for it and a raw client of the generated API.
type psEnv struct {
	s   *Server
	ps  *PubSub
	clk *clocktest.Clock
	raw pubsubapi.PubSubClient
	cl  *pubsub.Client
	tok string
}

func newPSEnv(t *testing.T, o PubSubOptions) *psEnv {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New(time.UnixMilli(1_700_000_000_000))
	s := New(t, Options{PublicKey: &key.PublicKey, Now: clk.Now,
		Objects: map[string]map[string]int{"Failed_Callout__c": {"Status__c": 0, "Callout_Id__c": 0}}})
	o.Entities = []string{"Failed_Callout__c"}
	e := &psEnv{s: s, ps: s.StartPubSub(t, o), clk: clk, tok: "emu-token"}
	s.mu.Lock()
	s.tokens[e.tok] = true
	s.mu.Unlock()
	creds := insecure.NewCredentials()
	if o.TLS {
		roots := x509.NewCertPool()
		roots.AddCert(s.Certificate())
		creds = credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(e.ps.Addr(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.raw = pubsubapi.NewPubSubClient(conn)
	e.cl = pubsub.New(conn, func(context.Context, bool) (pubsub.Auth, error) {
		return pubsub.Auth{AccessToken: e.tok, InstanceURL: s.URL, TenantID: OrgID}, nil
	})
	return e
}

// change sets Status__c of record id (creating it), publishing one change
// event.
func (e *psEnv) change(id, st string) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	e.s.upsertLocked("Failed_Callout__c", "Callout_Id__c", id, Record{"Callout_Id__c": id, "Status__c": st})
}

type changed struct {
	Header struct {
		EntityName string   `avro:"entityName"`
		RecordIDs  []string `avro:"recordIds"`
		ChangeType string   `avro:"changeType"`
	} `avro:"ChangeEventHeader"`
	Status *string `avro:"Status__c"`
	ID     *string `avro:"Callout_Id__c"`
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestPubSubTopicAndSchema: GetTopic describes the change event channel
// with its schema id; GetSchema gives a schema that decodes the events: a
// CREATE with every field set, an UPDATE with only the changed ones.
func TestPubSubTopicAndSchema(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{})
	ctx := ctxT(t)
	info, err := e.cl.Topic(ctx, "/data/Failed_Callout__ChangeEvent")
	if err != nil || !info.GetCanSubscribe() || info.GetSchemaId() == "" || info.GetTenantGuid() != OrgID {
		t.Fatalf("GetTopic = %v, %v", info, err)
	}
	if _, err := e.cl.Topic(ctx, "/data/Nothing__ChangeEvent"); !hasCode(err, codes.NotFound) {
		t.Fatalf("unknown topic: %v, want NOT_FOUND", err)
	}
	e.change("c1", "New")
	e.change("c1", "Reprocess Requested")
	var got []changed
	err = e.cl.Subscribe(ctx, pubsub.SubscribeOptions{Topic: "/data/Failed_Callout__ChangeEvent", Earliest: true, Batch: 2},
		func(ctx context.Context, b pubsub.Batch) error {
			for _, ev := range b.Events {
				var c changed
				if err := e.cl.Decode(ctx, ev.GetEvent(), &c); err != nil {
					return err
				}
				if ev.GetEvent().GetSchemaId() != info.GetSchemaId() {
					t.Errorf("event schema %s, topic schema %s", ev.GetEvent().GetSchemaId(), info.GetSchemaId())
				}
				got = append(got, c)
			}
			if len(got) == 2 {
				return errDone
			}
			return nil
		})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	if got[0].Header.ChangeType != "CREATE" || *got[0].Status != "New" || got[0].ID == nil || *got[0].ID != "c1" {
		t.Errorf("create event %+v", got[0])
	}
	if got[1].Header.ChangeType != "UPDATE" || *got[1].Status != "Reprocess Requested" || got[1].ID != nil ||
		len(got[1].Header.RecordIDs) != 1 || got[1].Header.EntityName != "Failed_Callout__c" {
		t.Errorf("update event %+v: want only the changed field", got[1])
	}
	if n := e.ps.Calls("GetSchema"); n != 1 {
		t.Errorf("%d GetSchema calls, want 1 (the client caches a schema id)", n)
	}
}

var errDone = errors.New("done")

// TestPubSubFlowControl: events are sent only while some are requested
// (num_requested); each response says how many are still pending; a
// further FetchRequest adds to them, at most 100 in all.
func TestPubSubFlowControl(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{})
	ctx := ctxT(t)
	for i := range 5 {
		e.change("c"+string(rune('0'+i)), "New")
	}
	stream := e.subscribe(t, ctx, &pubsubapi.FetchRequest{TopicName: "/data/Failed_Callout__ChangeEvent",
		ReplayPreset: pubsubapi.ReplayPreset_EARLIEST, NumRequested: 3})
	got := 0
	for got < 3 {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got += len(r.GetEvents())
		if want := int32(3 - got); r.GetPendingNumRequested() != want {
			t.Fatalf("pending %d after %d events, want %d", r.GetPendingNumRequested(), got, want)
		}
	}
	if got != 3 {
		t.Fatalf("%d events for num_requested 3", got)
	}
	// The other two come only once more are requested.
	if err := stream.Send(&pubsubapi.FetchRequest{NumRequested: 500}); err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil || len(r.GetEvents()) != 2 || r.GetPendingNumRequested() != 98 {
		t.Fatalf("after asking for 500 more: %d events, pending %d (%v); want 2, 98 (at most 100 pending)",
			len(r.GetEvents()), r.GetPendingNumRequested(), err)
	}
}

// subscribe opens a raw Subscribe stream with the env's metadata.
func (e *psEnv) subscribe(t *testing.T, ctx context.Context, first *pubsubapi.FetchRequest) pubsubapi.PubSub_SubscribeClient {
	t.Helper()
	stream, err := e.raw.Subscribe(withAuth(ctx, e.tok, e.s.URL, OrgID))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	return stream
}

// TestPubSubReplayPresets: LATEST delivers only later events, EARLIEST
// every retained one, CUSTOM those after the replay id; a malformed,
// unknown or expired replay id is refused with INVALID_ARGUMENT and the
// replayid.corrupted error code (pubsub.ErrReplayID).
func TestPubSubReplayPresets(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{Retention: 72 * time.Hour})
	ctx := ctxT(t)
	e.change("a", "New")
	e.change("b", "New")
	first := func(o pubsub.SubscribeOptions) (string, error) {
		o.Topic, o.Batch = "/data/Failed_Callout__ChangeEvent", 1
		var id string
		err := e.cl.Subscribe(ctx, o, func(ctx context.Context, b pubsub.Batch) error {
			var c changed
			if err := e.cl.Decode(ctx, b.Events[0].GetEvent(), &c); err != nil {
				return err
			}
			id = *c.ID
			return errDone
		})
		if errors.Is(err, errDone) {
			err = nil
		}
		return id, err
	}
	if id, err := first(pubsub.SubscribeOptions{Earliest: true}); err != nil || id != "a" {
		t.Fatalf("EARLIEST: first event %q, %v; want a", id, err)
	}
	for e.ps.Streams() != 0 { // the EARLIEST stream is gone
		time.Sleep(time.Millisecond)
	}
	go func() {
		for e.ps.Streams() == 0 {
			time.Sleep(time.Millisecond)
		}
		e.change("c", "New")
	}()
	if id, err := first(pubsub.SubscribeOptions{}); err != nil || id != "c" {
		t.Fatalf("LATEST: first event %q, %v; want c (published after the subscription)", id, err)
	}
	if id, err := first(pubsub.SubscribeOptions{After: replayID(1)}); err != nil || id != "b" {
		t.Fatalf("CUSTOM after the first event: %q, %v; want b", id, err)
	}
	for name, id := range map[string][]byte{"malformed": []byte("x"), "unknown": replayID(99)} {
		if _, err := first(pubsub.SubscribeOptions{After: id}); !errors.Is(err, pubsub.ErrReplayID) {
			t.Errorf("%s replay id: %v, want ErrReplayID", name, err)
		}
	}
	e.clk.Advance(73 * time.Hour)
	e.change("d", "New")
	if _, err := first(pubsub.SubscribeOptions{After: replayID(2)}); !errors.Is(err, pubsub.ErrReplayID) {
		t.Errorf("a replay id past the retention window: %v, want ErrReplayID", err)
	}
}

// TestPubSubAuthAndLifetime: a call without a valid token, instance URL
// or tenant id is UNAUTHENTICATED (pubsub.ErrAuth); a stream open for
// StreamLifetime on the injected clock is closed by the server (Subscribe
// returns nil: subscribe again); CloseStreams ends streams with
// UNAVAILABLE.
func TestPubSubAuthAndLifetime(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{StreamLifetime: 5 * time.Minute})
	ctx := ctxT(t)
	good := e.tok
	for _, bad := range []string{"tenant", "token"} {
		cl := e.cl
		if bad == "tenant" {
			conn, _ := grpc.NewClient(e.ps.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			defer conn.Close()
			cl = pubsub.New(conn, func(context.Context, bool) (pubsub.Auth, error) {
				return pubsub.Auth{AccessToken: good, InstanceURL: e.s.URL, TenantID: "00Dother"}, nil
			})
		} else {
			e.tok = "expired"
		}
		if _, err := cl.Topic(ctx, "/data/Failed_Callout__ChangeEvent"); !errors.Is(err, pubsub.ErrAuth) {
			t.Errorf("bad %s: GetTopic %v, want ErrAuth", bad, err)
		}
	}
	e.tok = good
	done := make(chan error, 1)
	go func() {
		done <- e.cl.Subscribe(ctx, pubsub.SubscribeOptions{Topic: "/data/Failed_Callout__ChangeEvent"},
			func(context.Context, pubsub.Batch) error { return nil })
	}()
	for e.ps.Streams() == 0 {
		time.Sleep(time.Millisecond)
	}
	e.clk.Advance(5 * time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("a stream past its lifetime: %v, want nil (closed by the server)", err)
	}
	go func() {
		done <- e.cl.Subscribe(ctx, pubsub.SubscribeOptions{Topic: "/data/Failed_Callout__ChangeEvent"},
			func(context.Context, pubsub.Batch) error { return nil })
	}()
	for e.ps.Streams() == 0 {
		time.Sleep(time.Millisecond)
	}
	e.ps.CloseStreams()
	if err := <-done; !hasCode(err, codes.Unavailable) {
		t.Fatalf("CloseStreams: %v, want UNAVAILABLE", err)
	}
}

// TestPubSubTLS: with PubSubOptions.TLS the API is served over TLS with
// the HTTPS side's certificate: a client trusting Certificate calls it,
// and Authenticated lists the metadata it authenticated with; a plaintext
// client gets no answer.
func TestPubSubTLS(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{TLS: true})
	ctx := ctxT(t)
	topic := TopicOf("Failed_Callout__c")
	if _, err := e.cl.Topic(ctx, topic); err != nil {
		t.Fatalf("GetTopic over TLS: %v", err)
	}
	want := []CallAuth{{AccessToken: e.tok, InstanceURL: e.s.URL, TenantID: OrgID}}
	if got := e.ps.Authenticated(); !slices.Equal(got, want) {
		t.Errorf("Authenticated() = %v, want %v", got, want)
	}
	conn, err := grpc.NewClient(e.ps.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = pubsubapi.NewPubSubClient(conn).GetTopic(withAuth(ctx, e.tok, e.s.URL, OrgID),
		&pubsubapi.TopicRequest{TopicName: topic})
	if !hasCode(err, codes.Unavailable) {
		t.Errorf("GetTopic in plaintext to the TLS server: %v, want UNAVAILABLE", err)
	}
}

// hasCode reports whether err carries a gRPC status of code c.
func hasCode(err error, c codes.Code) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == c
}

// withAuth adds the Pub/Sub API's authentication metadata.
func withAuth(ctx context.Context, tok, instance, tenant string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "accesstoken", tok, "instanceurl", instance, "tenantid", tenant)
}
