package sfemu

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
	"github.com/calloutproxy/callout-proxy/salesforce/pubsubapi"
)

// header is the ChangeEventHeader as the bitmap and gap tests read it.
type header struct {
	Header struct {
		RecordIDs     []string `avro:"recordIds"`
		ChangeType    string   `avro:"changeType"`
		ChangedFields []string `avro:"changedFields"`
		NulledFields  []string `avro:"nulledFields"`
		DiffFields    []string `avro:"diffFields"`
	} `avro:"ChangeEventHeader"`
	Status *string `avro:"Status__c"`
}

// events reads every retained event of the topic (EARLIEST), decoded.
func (e *psEnv) events(t *testing.T, n int) ([]header, avro.Schema) {
	t.Helper()
	ctx := ctxT(t)
	var got []header
	var sc avro.Schema
	err := e.cl.Subscribe(ctx, pubsub.SubscribeOptions{Topic: "/data/Failed_Callout__ChangeEvent", Earliest: true},
		func(ctx context.Context, b pubsub.Batch) error {
			for _, ev := range b.Events {
				var h header
				if err := e.cl.Decode(ctx, ev.GetEvent(), &h); err != nil {
					return err
				}
				var err error
				if sc, err = e.cl.Schema(ctx, ev.GetEvent().GetSchemaId()); err != nil {
					return err
				}
				got = append(got, h)
			}
			if len(got) >= n {
				return errDone
			}
			return nil
		})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	return got, sc
}

// TestPubSubBitmapFields: an update's changedFields and nulledFields are
// the Pub/Sub API's hex bitmaps of schema positions (the header is field
// 0, then Callout_Id__c 1 and Status__c 2 here), changedFields naming the
// nulled field too; a create's changedFields is empty; diffFields stays
// empty. The client's DecodeBitmap reads them back as names.
func TestPubSubBitmapFields(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{})
	e.change("c1", "New")
	e.change("c1", "Reprocess Requested")
	e.s.mu.Lock()
	e.s.upsertLocked("Failed_Callout__c", "Callout_Id__c", "c1", Record{"Callout_Id__c": "c1", "Status__c": nil})
	e.s.mu.Unlock()
	got, sc := e.events(t, 3)
	if c := got[0].Header; c.ChangeType != "CREATE" || len(c.ChangedFields) != 0 || len(c.NulledFields) != 0 {
		t.Errorf("create header %+v: want empty bitmaps", c)
	}
	if c := got[1].Header; !slices.Equal(c.ChangedFields, []string{"0x04"}) || len(c.NulledFields) != 0 ||
		len(c.DiffFields) != 0 {
		t.Errorf("update of Status__c: changed %q, nulled %q, diff %q; want [0x04] (bit 2), [], []",
			c.ChangedFields, c.NulledFields, c.DiffFields)
	}
	if c := got[2].Header; !slices.Equal(c.ChangedFields, []string{"0x04"}) || !slices.Equal(c.NulledFields, []string{"0x04"}) ||
		got[2].Status != nil {
		t.Errorf("Status__c set to null: changed %q, nulled %q, status %v; want [0x04] twice, nil",
			c.ChangedFields, c.NulledFields, got[2].Status)
	}
	if names, err := pubsub.DecodeBitmap(sc, got[1].Header.ChangedFields); err != nil || !slices.Equal(names, []string{"Status__c"}) {
		t.Errorf("decoded changedFields %v, %v; want [Status__c]", names, err)
	}
}

// TestPubSubGapEvents: with GapNext, a change publishes a gap event
// instead of its change event (GAP_UPDATE, the record id, no fields, no
// bitmaps); PublishGap sends an overflow event without record ids.
func TestPubSubGapEvents(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{})
	e.change("c1", "New")
	e.ps.GapNext(1)
	e.change("c1", "Reprocess Requested")
	e.ps.PublishGap(t, "Failed_Callout__c", "GAP_OVERFLOW")
	e.change("c1", "Discarded")
	got, _ := e.events(t, 4)
	gap := got[1]
	if gap.Header.ChangeType != "GAP_UPDATE" || len(gap.Header.RecordIDs) != 1 || gap.Status != nil ||
		len(gap.Header.ChangedFields) != 0 {
		t.Errorf("gap event %+v (status %v): want GAP_UPDATE, one record id, no field, no bitmap", gap.Header, gap.Status)
	}
	if o := got[2].Header; o.ChangeType != "GAP_OVERFLOW" || len(o.RecordIDs) != 0 {
		t.Errorf("overflow event %+v: want GAP_OVERFLOW without record ids", o)
	}
	if u := got[3]; u.Header.ChangeType != "UPDATE" || u.Status == nil || *u.Status != "Discarded" {
		t.Errorf("the change after the gap: %+v, want an UPDATE event again", u.Header)
	}
}

// TestPubSubFetchWithin: with every requested event delivered, a stream
// whose client sends no FetchRequest within 60 s of the last FetchResponse
// is closed by the server (the RPC ends OK); one whose client asked again
// (events pending) stays open past 60 s. Pending counts what the streams
// asked for and were not sent.
func TestPubSubFetchWithin(t *testing.T) {
	e := newPSEnv(t, PubSubOptions{})
	ctx := ctxT(t)
	e.change("c1", "New")
	first := &pubsubapi.FetchRequest{TopicName: "/data/Failed_Callout__ChangeEvent",
		ReplayPreset: pubsubapi.ReplayPreset_EARLIEST, NumRequested: 1}
	asking := e.subscribe(t, ctx, first)
	silent := e.subscribe(t, ctx, first)
	for _, s := range []pubsubapi.PubSub_SubscribeClient{asking, silent} {
		if r, err := s.Recv(); err != nil || len(r.GetEvents()) != 1 || r.GetPendingNumRequested() != 0 {
			t.Fatalf("first response: %v, %v; want one event, none pending", r, err)
		}
	}
	if n := e.ps.Pending(); n != 0 {
		t.Fatalf("%d events pending with every requested one sent, want 0", n)
	}
	if err := asking.Send(&pubsubapi.FetchRequest{NumRequested: 2}); err != nil {
		t.Fatal(err)
	}
	e.change("c2", "New")
	if r, err := asking.Recv(); err != nil || len(r.GetEvents()) != 1 || r.GetPendingNumRequested() != 1 {
		t.Fatalf("after asking for 2 more: %v, %v; want one event, one pending", r, err)
	}
	if n := e.ps.Pending(); n != 1 {
		t.Fatalf("Pending() = %d after the response saying one is pending, want 1", n)
	}
	e.clk.Advance(61 * time.Second)
	if _, err := silent.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the silent stream after 61 s: %v, want closed OK (io.EOF)", err)
	}
	e.change("c3", "New")
	if r, err := asking.Recv(); err != nil || len(r.GetEvents()) != 1 {
		t.Fatalf("the stream with an event pending after 61 s: %v, %v; want it open, delivering", r, err)
	}
}
