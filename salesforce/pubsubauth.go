package salesforce

import (
	"context"
	"fmt"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// PubSubAuth is sfapi.Client.PubSubAuth of the writer's API client, for the
// composition root, which builds the writer from configuration. Errors: the
// writer's API is not an *sfapi.Client (a test double), or the mint's.
func (w *Writer) PubSubAuth(ctx context.Context, renew bool) (pubsub.Auth, error) {
	c, ok := w.o.API.(*sfapi.Client)
	if !ok {
		return pubsub.Auth{}, fmt.Errorf("salesforce: the writer's API is not a Salesforce client")
	}
	return c.PubSubAuth(ctx, renew)
}
