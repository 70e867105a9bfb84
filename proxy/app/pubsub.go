package app

import (
	"crypto/tls"
	"fmt"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/sfsub"
	"github.com/calloutproxy/callout-proxy/salesforce"
	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
)

// newSubscription builds the Pub/Sub API subscription to the change events
// of Failed_Callout__c (salesforce.Subscription: one replica subscribes,
// the replay id in Redis, the polls as its fallback) over a TLS gRPC
// connection to salesforce.pubsub, authenticated by auth (the writer's
// client's token: sfapi.Client.PubSubAuth).
// It returns nil (the reprocessor then polls on its own) without Salesforce
// or with pubsub: off, and the function that closes the connection.
// Errors: the subscription state's scripts (a build defect).
func newSubscription(cfg *config.Config, auth pubsub.AuthFunc, rp *salesforce.Reprocessor,
	rdb redis.UniversalClient, scripts *script.Functions) (*salesforce.Subscription, func(), error) {
	if cfg.Salesforce == nil || cfg.Salesforce.PubSub == config.PubSubOff {
		return nil, func() {}, nil
	}
	conn, err := grpc.NewClient(cfg.Salesforce.PubSub,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	if err != nil {
		return nil, nil, fmt.Errorf("salesforce.pubsub: %w", err)
	}
	state, err := sfsub.New(rdb, salesforce.ChangeEventTopic, scripts)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	sub, err := salesforce.NewSubscription(salesforce.SubscriptionOptions{Reprocessor: rp,
		PubSub: pubsub.New(conn, auth), State: state})
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return sub, func() { _ = conn.Close() }, nil
}
