package sfemu

import (
	"context"
	"encoding/binary"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsubapi"
)

// authErrorCode is the error code of a refused authentication ("Handle
// Errors").
const authErrorCode = "sfdc.platform.eventbus.grpc.service.auth.error"

// replayIDErrorCode is the error code of an invalid replay id ("Retry
// Long-Lived RPC Calls After an Error Occurs").
const replayIDErrorCode = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted"

// fetchWithin is how long after its last FetchResponse a stream with no
// events pending waits for a FetchRequest before the server closes it
// ("Subscribe RPC Method", Subscribe Keepalive Behavior).
const fetchWithin = 60 * time.Second

// unary counts a unary call of method and checks its metadata.
func (p *PubSub) unary(ctx context.Context, method string) error {
	p.count(method)
	md, _ := metadata.FromIncomingContext(ctx)
	if msg := p.authError(md); msg != "" {
		return withCode(func(m metadata.MD) error { return grpc.SetTrailer(ctx, m) }, codes.Unauthenticated,
			authErrorCode, msg)
	}
	return nil
}

// GetTopic describes a topic ("GetTopic RPC Method").
func (p *PubSub) GetTopic(ctx context.Context, r *pubsubapi.TopicRequest) (*pubsubapi.TopicInfo, error) {
	if err := p.unary(ctx, "GetTopic"); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := p.topics[r.GetTopicName()]
	if tp == nil {
		return nil, status.Errorf(codes.NotFound, "topic %s not found", r.GetTopicName())
	}
	return &pubsubapi.TopicInfo{TopicName: tp.name, TenantGuid: OrgID, CanSubscribe: true, SchemaId: tp.schemaID,
		RpcId: "emu-rpc"}, nil
}

// GetSchema returns the schema of an id ("GetSchema RPC Method").
func (p *PubSub) GetSchema(ctx context.Context, r *pubsubapi.SchemaRequest) (*pubsubapi.SchemaInfo, error) {
	if err := p.unary(ctx, "GetSchema"); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, tp := range p.topics {
		if tp.schemaID == r.GetSchemaId() {
			return &pubsubapi.SchemaInfo{SchemaJson: tp.schemaJSON, SchemaId: tp.schemaID, RpcId: "emu-rpc"}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "schema %s not found", r.GetSchemaId())
}

// Subscribe serves one stream (the package comment of pubsub.go lists the
// behaviours).
func (p *PubSub) Subscribe(stream pubsubapi.PubSub_SubscribeServer) error {
	p.count("Subscribe")
	md, _ := metadata.FromIncomingContext(stream.Context())
	if msg := p.authError(md); msg != "" {
		return withCode(func(m metadata.MD) error { stream.SetTrailer(m); return nil }, codes.Unauthenticated,
			authErrorCode, msg)
	}
	p.mu.Lock()
	if p.fails > 0 {
		p.fails--
		p.mu.Unlock()
		return status.Error(codes.Unavailable, "the service is unavailable")
	}
	p.mu.Unlock()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.presets = append(p.presets, first.GetReplayPreset().String())
	tp := p.topics[first.GetTopicName()]
	if tp == nil {
		p.mu.Unlock()
		return status.Errorf(codes.NotFound, "topic %s not found", first.GetTopicName())
	}
	now := p.s.o.Now()
	p.purgeLocked(tp, now)
	pos, ok := p.startLocked(tp, first)
	if !ok {
		p.mu.Unlock()
		return withCode(func(m metadata.MD) error { stream.SetTrailer(m); return nil }, codes.InvalidArgument,
			replayIDErrorCode, "The Replay ID validation failed.")
	}
	pending := min(max(first.GetNumRequested(), 0), 100)
	p.streams++
	p.pending += int(pending)
	closed := p.closeCh
	p.mu.Unlock()
	setPending := func(n int32) { // pending, as Pending counts it
		p.mu.Lock()
		p.pending += int(n - pending)
		p.mu.Unlock()
		pending = n
	}
	defer func() {
		setPending(0)
		p.mu.Lock()
		p.streams--
		p.mu.Unlock()
	}()

	more := make(chan int32, 16)
	go func() { // later FetchRequests only add to the events pending
		for {
			r, err := stream.Recv()
			if err != nil {
				close(more)
				return
			}
			more <- r.GetNumRequested()
		}
	}()
	opened, lastSent := now, now
	tick := time.NewTicker(2 * time.Millisecond) // re-reads the injected clock and the event log
	defer tick.Stop()
	for {
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-closed:
			return status.Error(codes.Unavailable, "the server closed the stream")
		case n, ok := <-more:
			if !ok {
				return nil
			}
			setPending(min(pending+max(n, 0), 100)) // at most 100 pending ("Pull Subscription and Flow Control")
		case <-tick.C:
		}
		now := p.s.o.Now()
		if now.Sub(opened) >= p.o.StreamLifetime {
			return nil // closed by the server: the client subscribes again
		}
		if pending == 0 && now.Sub(lastSent) >= fetchWithin {
			return nil // no FetchRequest within 60 s of the last FetchResponse
		}
		resp := p.next(tp, &pos, &pending, now)
		if resp == nil && pending > 0 && now.Sub(lastSent) >= p.o.Keepalive {
			resp = &pubsubapi.FetchResponse{LatestReplayId: replayID(p.latest(tp)), PendingNumRequested: pending,
				RpcId: "emu-rpc"}
		}
		if resp == nil {
			continue
		}
		lastSent = now
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// startLocked returns the position (the last sequence number already
// delivered) a first FetchRequest asks for; false for a CUSTOM replay id
// that is malformed, unknown or no longer retained.
func (p *PubSub) startLocked(tp *topic, r *pubsubapi.FetchRequest) (uint64, bool) {
	last := p.seq
	switch r.GetReplayPreset() {
	case pubsubapi.ReplayPreset_EARLIEST:
		if len(tp.events) > 0 {
			return tp.events[0].seq - 1, true
		}
		return last, true
	case pubsubapi.ReplayPreset_CUSTOM:
		id := r.GetReplayId()
		if len(id) != 8 {
			return 0, false
		}
		seq := binary.BigEndian.Uint64(id)
		retained := len(tp.events) > 0 && seq >= tp.events[0].seq
		if seq > last || !retained && seq != last {
			return 0, false // unknown, or its event is past the retention window
		}
		return seq, true
	}
	return last, true // LATEST
}

// purgeLocked drops events older than the retention window.
func (p *PubSub) purgeLocked(tp *topic, now time.Time) {
	n := 0
	for n < len(tp.events) && now.Sub(tp.events[n].at) > p.o.Retention {
		n++
	}
	tp.events = tp.events[n:]
}

// next returns the FetchResponse of the events after *pos, at most
// *pending of them, moving *pos and taking them off *pending (and off
// Pending's count, in the same critical section); nil when there are none
// or none pending.
func (p *PubSub) next(tp *topic, pos *uint64, pending *int32, now time.Time) *pubsubapi.FetchResponse {
	if *pending <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.purgeLocked(tp, now)
	resp := &pubsubapi.FetchResponse{RpcId: "emu-rpc"}
	for _, ev := range tp.events {
		if ev.seq <= *pos || int32(len(resp.Events)) >= *pending {
			continue
		}
		resp.Events = append(resp.Events, &pubsubapi.ConsumerEvent{ReplayId: replayID(ev.seq),
			Event: &pubsubapi.ProducerEvent{Id: ev.id, SchemaId: tp.schemaID, Payload: ev.payload}})
	}
	if len(resp.Events) == 0 {
		return nil
	}
	*pos = binary.BigEndian.Uint64(resp.Events[len(resp.Events)-1].ReplayId)
	resp.LatestReplayId = replayID(*pos)
	resp.PendingNumRequested = *pending - int32(len(resp.Events))
	p.pending -= len(resp.Events)
	*pending = resp.PendingNumRequested
	return resp
}

// latest is the topic's newest sequence number.
func (p *PubSub) latest(tp *topic) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}
