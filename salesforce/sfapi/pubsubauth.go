package sfapi

import (
	"context"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
)

// PubSubAuth returns the metadata every Pub/Sub API call carries — the
// access token, the instance URL and the org id ("Pub/Sub API:
// Authentication"; "Include Authorization Headers in RPC Method Calls") —
// from the client's one cached token, the same one its REST calls use (no
// second login). With renew the token is replaced first, as after an
// UNAUTHENTICATED answer (the REST calls' INVALID_SESSION_ID rule:
// tokens.renew). Errors: the mint's *Error.
func (c *Client) PubSubAuth(ctx context.Context, renew bool) (pubsub.Auth, error) {
	tok, terr := c.tokens.get(ctx)
	if terr == nil && renew {
		tok, terr = c.tokens.renew(ctx, tok)
	}
	if terr != nil {
		return pubsub.Auth{}, terr
	}
	return pubsub.Auth{AccessToken: tok.AccessToken, InstanceURL: tok.InstanceURL, TenantID: tok.OrgID}, nil
}
