package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// endpointSecrets is the cached credentials.Set of one endpoint, with the
// configuration it was built from.
type endpointSecrets struct {
	key string
	set *credentials.Set
}

// secretsKey is everything an endpoint's credentials.Set is built from:
// references (variable names, paths), never values.
func secretsKey(ep *config.Endpoint) string {
	k := fmt.Sprint(ep.Headers, " ", ep.AttemptTimeout)
	if ep.OAuth2 != nil {
		k += fmt.Sprintf(" oauth2 %+v", *ep.OAuth2)
	}
	if ep.TLS != nil {
		k += fmt.Sprintf(" tls %+v", *ep.TLS)
	}
	if ep.StandardWebhooks != nil {
		k += fmt.Sprintf(" standard_webhooks %+v", *ep.StandardWebhooks)
	}
	if ep.AWSSigV4 != nil {
		k += fmt.Sprintf(" aws_sigv4 %+v", *ep.AWSSigV4)
	}
	return k
}

// credentials returns ep's credentials, building them on first use and
// again when the endpoint's credential configuration changed.
func (f *Forwarder) credentials(ep *config.Endpoint) *credentials.Set {
	key := secretsKey(ep)
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.creds[ep.Name]; ok && c.key == key {
		return c.set
	}
	set := credentials.New(ep, credentials.Options{
		Now: f.now, Logger: f.logger, Getenv: f.getenv, RecheckInterval: f.recheck,
		TokenClient: f.tokenClient,
	})
	f.creds[ep.Name] = &endpointSecrets{key: key, set: set}
	return set
}

// staticHeaders are the endpoint's injected headers: Options.HeaderValues
// when set, else the credentials' (rotated files included).
func (f *Forwarder) staticHeaders(ep *config.Endpoint, creds *credentials.Set) (http.Header, error) {
	if f.headerValues != nil {
		return f.headerValues(ep)
	}
	return creds.Header()
}

// tokenFailure maps a failure to get ep's OAuth2 token into Attempt.Err:
//
//   - the caller's context canceled: an error matching context.Canceled;
//   - the token URL's dial refused by the SSRF guard: *problem.Error
//     BlockedAddress (a configuration no retry fixes);
//   - a credential never loadable (*credentials.ConfigError): *problem.Error
//     Internal, as for a static header;
//   - anything else (token endpoint down, slow, refusing the client): an
//     error matching policy.ErrCredentials — Retryable "credentials".
func tokenFailure(parent context.Context, ep *config.Endpoint, err error) error {
	if errors.Is(parent.Err(), context.Canceled) {
		if !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: %w", context.Canceled, err)
		}
		return err
	}
	if be, ok := errors.AsType[*blockedError](err); ok {
		return &problem.Error{
			Code: problem.BlockedAddress,
			Detail: "the oauth2 token_url of endpoint " + ep.Name + " is not an allowed address: not public, " +
				"not in its allowed_networks, a cloud metadata address, or not the token URL's port",
			Err: be,
		}
	}
	if ce, ok := errors.AsType[*credentials.ConfigError](err); ok {
		return problem.Wrap(problem.Internal, "the oauth2 credentials of endpoint "+ep.Name+" could not be read", ce)
	}
	if !errors.Is(err, policy.ErrCredentials) {
		err = &credentials.Error{Endpoint: ep.Name, Err: err}
	}
	return err
}

// signFailure maps a failure to sign an attempt of ep (credentials.Set.Sign)
// into Attempt.Err:
//
//   - the caller's context canceled: an error matching context.Canceled;
//   - a signing secret never loadable or malformed (*credentials.ConfigError):
//     *problem.Error Internal, as for a static header;
//   - a query aws_sigv4 cannot sign as sent (*credentials.QueryError):
//     *problem.Error InvalidRequest (400), the caller's request at fault;
//   - the AWS credential chain without credentials (*credentials.Error): an
//     error matching policy.ErrCredentials — Retryable "credentials";
//     nothing reached the upstream.
func signFailure(parent context.Context, ep *config.Endpoint, err error) error {
	if errors.Is(parent.Err(), context.Canceled) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", context.Canceled, err)
	}
	if qe, ok := errors.AsType[*credentials.QueryError](err); ok {
		return problem.Wrap(problem.InvalidRequest, "endpoint "+ep.Name+" signs with AWS Signature Version 4, which cannot sign this query as sent (use '&' between parameters and valid %-escapes)", qe)
	}
	if ce, ok := errors.AsType[*credentials.ConfigError](err); ok {
		return problem.Wrap(problem.Internal, "the signing credentials of endpoint "+ep.Name+" could not be read", ce)
	}
	return err
}
