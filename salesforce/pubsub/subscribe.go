package pubsub

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/metadata"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsubapi"
)

// Batch is what one FetchResponse brought: its events (possibly none: a
// keepalive) and the replay id to resume after once they are handled — the
// last event's, or the response's latest_replay_id for a keepalive ("Subscribe
// RPC Method": a keepalive carries the latest replay id of the stream).
type Batch struct {
	Events   []*pubsubapi.ConsumerEvent
	ReplayID []byte
}

// SubscribeOptions say where a stream starts and how many events it asks
// for at a time.
type SubscribeOptions struct {
	// Topic is the topic name, e.g. /data/Failed_Callout__ChangeEvent.
	Topic string
	// After is the replay id to resume after (replay preset CUSTOM); nil
	// starts at the latest event (LATEST): only events published after
	// the subscription are delivered ("Pub/Sub API: Replay an Event
	// Stream").
	After []byte
	// Earliest, with no After, starts at the earliest retained event
	// (EARLIEST) instead of the latest.
	Earliest bool
	// Batch is num_requested of each FetchRequest (1 … MaxBatch; default
	// MaxBatch): the next one is sent as soon as the events of the last
	// are all delivered (pending_num_requested 0), before they are
	// handled, so the client never holds more than 2 × Batch events it has
	// not handled ("Pull Subscription and Flow Control") and a batch that
	// takes long to handle does not close the stream (with none pending,
	// the server closes a stream that sends no FetchRequest within 60 s of
	// the last FetchResponse: "Subscribe RPC Method", Subscribe Keepalive
	// Behavior).
	Batch int32
	// Opened, when set, is called once the first FetchRequest is sent
	// (the subscription's position is set from then on); an error ends
	// the stream and is returned.
	Opened func() error
}

// Subscribe opens one Subscribe stream ("Subscribe RPC Method":
// bidirectional, pull-based) and calls handle with every FetchResponse, in
// order, until the stream ends, handle fails or ctx ends. It returns nil
// when the server closed the stream normally (Salesforce closes streams
// from time to time; resubscribe after the last handled replay id), else
// the error: ErrReplayID, ErrAuth, handle's, the transport's.
func (c *Client) Subscribe(ctx context.Context, o SubscribeOptions, handle func(ctx context.Context, b Batch) error) error {
	if o.Batch <= 0 || o.Batch > MaxBatch {
		o.Batch = MaxBatch
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when handle fails
	octx, err := c.outgoing(ctx)
	if err != nil {
		return err
	}
	stream, err := c.api.Subscribe(octx)
	if err != nil {
		return c.classify("Subscribe", err, nil)
	}
	first := &pubsubapi.FetchRequest{TopicName: o.Topic, ReplayPreset: pubsubapi.ReplayPreset_LATEST, NumRequested: o.Batch}
	switch {
	case o.After != nil:
		first.ReplayPreset, first.ReplayId = pubsubapi.ReplayPreset_CUSTOM, o.After
	case o.Earliest:
		first.ReplayPreset = pubsubapi.ReplayPreset_EARLIEST
	}
	if err := stream.Send(first); err != nil {
		return c.recvErr(stream.Recv, stream.Trailer)
	}
	if o.Opened != nil {
		if err := o.Opened(); err != nil {
			return err
		}
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil // closed by the server: resubscribe
		}
		if err != nil {
			return c.classify("Subscribe", err, stream.Trailer())
		}
		if resp.GetPendingNumRequested() == 0 {
			// Everything asked for arrived: ask for the next batch now (a
			// stream with nothing pending and no FetchRequest for 60 s is
			// closed, "Subscribe RPC Method", Subscribe Keepalive Behavior).
			if err := stream.Send(&pubsubapi.FetchRequest{TopicName: o.Topic, NumRequested: o.Batch}); err != nil {
				return c.recvErr(stream.Recv, stream.Trailer)
			}
		}
		b := Batch{Events: resp.GetEvents(), ReplayID: resp.GetLatestReplayId()}
		if n := len(b.Events); n > 0 {
			b.ReplayID = b.Events[n-1].GetReplayId()
		}
		if err := handle(ctx, b); err != nil {
			return err
		}
	}
}

// recvErr returns the status a failed Send stands for (nil: the server
// closed the stream normally, resubscribe): gRPC reports it on
// the next Recv (a Send error is only io.EOF).
func (c *Client) recvErr(recv func() (*pubsubapi.FetchResponse, error), trailer func() metadata.MD) error {
	for {
		_, err := recv()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil // closed by the server: resubscribe
		}
		return c.classify("Subscribe", err, trailer())
	}
}
