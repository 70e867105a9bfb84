// Package pubsub is a client of the Salesforce Pub/Sub API (gRPC, the
// published pubsub_api.proto: salesforce/pubsubapi) for one job: reading an
// event stream with Subscribe, pull-based, from a replay position, and
// decoding its Avro payloads with the schema GetSchema gives ("Pub/Sub API
// Developer Guide", https://developer.salesforce.com/docs/platform/pub-sub-api/overview).
// It knows nothing of the proxy: authentication comes from a function
// (package salesforce's token source), positions are stored by the caller.
package pubsub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsubapi"
)

// DefaultAddress is the Pub/Sub API's gRPC endpoint for every org ("Pub/Sub
// API Endpoint": api.pubsub.salesforce.com:7443, TLS).
const DefaultAddress = "api.pubsub.salesforce.com:7443"

// MaxBatch is the most events one Subscribe call may have pending ("Pull
// Subscription and Flow Control": more than 100 requested counts as 100).
const MaxBatch = 100

// Auth is the metadata every RPC carries ("Pub/Sub API: Authentication",
// "Include Authorization Headers in RPC Method Calls"): accesstoken (the
// OAuth access token), instanceurl (the org's My Domain URL, as the token
// answer's instance_url gives it) and tenantid (the org id).
type Auth struct {
	AccessToken, InstanceURL, TenantID string
}

// AuthFunc returns the metadata for a call; renew asks for a new token
// (the last call was answered UNAUTHENTICATED).
type AuthFunc func(ctx context.Context, renew bool) (Auth, error)

// ErrReplayID is what Subscribe returns (wrapped) when Salesforce refused
// the CUSTOM replay id as invalid, for instance one outside the 72-hour
// retention window: the gRPC status carries the error code
// sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted (or
// another ...fetch.replayid.* code) in its trailers ("Retry Long-Lived RPC
// Calls After an Error Occurs": resubscribe with another replay preset).
var ErrReplayID = errors.New("pubsub: the replay id is invalid or expired")

// ErrAuth is what calls return (wrapped) when Salesforce answered
// UNAUTHENTICATED: the next call should renew the token.
var ErrAuth = errors.New("pubsub: not authenticated")

// replayIDCodes is the prefix of the error codes of a refused replay id
// ("Handle Errors": the custom error code in the trailers, key error-code).
const replayIDCodes = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid."

// ErrorCodeKey is the trailer key of the Pub/Sub API's own error code
// ("Handle Errors").
const ErrorCodeKey = "error-code"

// Client calls the Pub/Sub API over one gRPC connection. Make it with
// New; safe for concurrent use.
type Client struct {
	api  pubsubapi.PubSubClient
	auth AuthFunc

	mu      sync.Mutex
	renew   bool                   // the last call was UNAUTHENTICATED
	schemas map[string]avro.Schema // by schema id; a schema id names one schema forever
}

// New returns a client on conn (a *grpc.ClientConn to DefaultAddress with
// TLS, or the emulator's) authenticated by auth.
func New(conn grpc.ClientConnInterface, auth AuthFunc) *Client {
	return &Client{api: pubsubapi.NewPubSubClient(conn), auth: auth, schemas: map[string]avro.Schema{}}
}

// outgoing returns ctx with the authentication metadata.
func (c *Client) outgoing(ctx context.Context) (context.Context, error) {
	c.mu.Lock()
	renew := c.renew
	c.mu.Unlock()
	a, err := c.auth(ctx, renew)
	if err != nil {
		return nil, fmt.Errorf("pubsub: token: %w", err)
	}
	c.mu.Lock()
	c.renew = false
	c.mu.Unlock()
	return metadata.AppendToOutgoingContext(ctx, "accesstoken", a.AccessToken, "instanceurl", a.InstanceURL,
		"tenantid", a.TenantID), nil
}

// classify turns a call's error into ErrAuth, ErrReplayID or itself, noting
// an UNAUTHENTICATED answer so that the next call renews the token.
func (c *Client) classify(op string, err error, trailer metadata.MD) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	st, _ := status.FromError(err)
	code := ""
	if v := trailer.Get(ErrorCodeKey); len(v) > 0 {
		code = v[0]
	}
	switch {
	case st.Code() == codes.Unauthenticated:
		c.mu.Lock()
		c.renew = true
		c.mu.Unlock()
		return fmt.Errorf("pubsub: %s: %w: %w", op, ErrAuth, err)
	case strings.HasPrefix(code, replayIDCodes):
		return fmt.Errorf("pubsub: %s: %w (%s): %w", op, ErrReplayID, code, err)
	}
	return fmt.Errorf("pubsub: %s: %w", op, err)
}

// Topic returns the topic's description ("GetTopic RPC Method"): whether
// the user can subscribe, its schema id. Errors: the call's.
func (c *Client) Topic(ctx context.Context, name string) (*pubsubapi.TopicInfo, error) {
	ctx, err := c.outgoing(ctx)
	if err != nil {
		return nil, err
	}
	var tr metadata.MD
	info, err := c.api.GetTopic(ctx, &pubsubapi.TopicRequest{TopicName: name}, grpc.Trailer(&tr))
	return info, c.classify("GetTopic", err, tr)
}

// Schema returns the Avro schema of id, asking GetSchema once per id ("GetSchema
// RPC Method": an event's schema_id names its schema; the schema of an id
// never changes). Errors: the call's, or a schema that does not parse.
func (c *Client) Schema(ctx context.Context, id string) (avro.Schema, error) {
	c.mu.Lock()
	sc, ok := c.schemas[id]
	c.mu.Unlock()
	if ok {
		return sc, nil
	}
	octx, err := c.outgoing(ctx)
	if err != nil {
		return nil, err
	}
	var tr metadata.MD
	info, err := c.api.GetSchema(octx, &pubsubapi.SchemaRequest{SchemaId: id}, grpc.Trailer(&tr))
	if err != nil {
		return nil, c.classify("GetSchema", err, tr)
	}
	if sc, err = avro.Parse(info.GetSchemaJson()); err != nil {
		return nil, fmt.Errorf("pubsub: schema %s: %w", id, err)
	}
	c.mu.Lock()
	c.schemas[id] = sc
	c.mu.Unlock()
	return sc, nil
}

// Decode decodes an event's Avro payload into v (a struct with avro tags,
// or a map[string]any) with the schema of its schema id. Errors: Schema's,
// or a payload that does not match it.
func (c *Client) Decode(ctx context.Context, ev *pubsubapi.ProducerEvent, v any) error {
	sc, err := c.Schema(ctx, ev.GetSchemaId())
	if err != nil {
		return err
	}
	if err := avro.Unmarshal(sc, ev.GetPayload(), v); err != nil {
		return fmt.Errorf("pubsub: event %s: %w", ev.GetId(), err)
	}
	return nil
}
