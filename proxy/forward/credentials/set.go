// Package credentials holds what the proxy adds to an upstream request so
// that the upstream API accepts it on the org's behalf — the job a Named
// Credential did when Apex called the API directly (contract §10, endpoint
// `headers`, `oauth2` and `tls`):
//
//   - static headers whose values come from environment variables or files;
//   - an OAuth 2.0 access token of the client credentials grant (RFC 6749
//     §4.4, golang.org/x/oauth2/clientcredentials), cached and fetched again
//     before it expires, one request at a time whatever the number of
//     goroutines, and dropped when the upstream refuses it (401);
//   - a client certificate for mutual TLS and a CA bundle for a private
//     upstream CA.
//
// Every file is polled on use, at most once per Options.RecheckInterval
// (default 1 s), and a change is used by the next attempt: rotating a
// Kubernetes Secret needs no restart. A file that turns bad keeps the
// previous value and logs one error per change.
//
// Nothing here logs or returns a credential's value: errors and logs name
// configuration keys, variables and paths; a Token prints as "redacted".
// The forwarder (package forward) owns the HTTP clients and calls this
// package on every attempt.
package credentials

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// Options configure the credentials of one endpoint. The zero value works
// except for TokenClient, which an endpoint with oauth2 needs.
type Options struct {
	// Now is the clock of token expiry and file re-checks; time.Now if nil.
	Now func() time.Time
	// Logger receives file rotations (info), unusable files (error) and
	// failed token requests (warn), with the endpoint and key, never a
	// value. Discarded if nil.
	Logger *slog.Logger
	// Getenv reads environment variables; os.Getenv if nil.
	Getenv func(string) string
	// RecheckInterval is the least time between two reads of one file;
	// DefaultRecheckInterval (1 s) if zero or negative.
	RecheckInterval time.Duration
	// TokenClient returns the HTTP client that sends the endpoint's token
	// requests, trusting roots (nil: the base roots); rootsID changes
	// whenever roots do. It must not follow redirects or use a proxy from
	// the environment, and must apply the endpoint's SSRF rules to the
	// token URL's host and port.
	TokenClient func(ep *config.Endpoint, roots *x509.CertPool, rootsID uint64) (*http.Client, error)
}

// Set is one endpoint's upstream credentials. It is safe for concurrent
// use. Build a new one when the endpoint's configuration changes.
type Set struct {
	static   map[string]*secret // canonical header name -> value
	token    *tokenSource       // nil without oauth2
	tls      *tlsFiles          // nil without tls
	webhooks *webhookSigner     // nil without standard_webhooks
	aws      *awsSigner         // nil without aws_sigv4
}

// New returns the credentials of ep (a loaded endpoint: Name set, keys
// validated). Nothing is read yet: files are read on first use.
func New(ep *config.Endpoint, o Options) *Set {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RecheckInterval <= 0 {
		o.RecheckInterval = DefaultRecheckInterval
	}
	key := "endpoints." + ep.Name
	s := &Set{static: make(map[string]*secret, len(ep.Headers))}
	for name, ref := range ep.Headers {
		s.static[http.CanonicalHeaderKey(name)] = newSecret(key+".headers."+name, ref, &o)
	}
	if oa := ep.OAuth2; oa != nil {
		ts := &tokenSource{
			endpoint: ep.Name, cfg: *oa, now: o.Now, logger: o.Logger, timeout: ep.AttemptTimeout,
			clientID:     newSecret(key+".oauth2.client_id", oa.ClientID, &o),
			clientSecret: newSecret(key+".oauth2.client_secret", oa.ClientSecret, &o),
			client: func(roots *x509.CertPool, id uint64) (*http.Client, error) {
				return o.TokenClient(ep, roots, id)
			},
		}
		if ts.timeout <= 0 {
			ts.timeout = policy.Defaults().AttemptTimeout
		}
		if oa.CAFile != "" {
			ts.ca = newWatched(&o, key+".oauth2.ca_file", []string{oa.CAFile}, maxPEMBytes, parseCAs)
		}
		s.token = ts
	}
	if ep.TLS != nil {
		s.tls = newTLSFiles(key+".tls", ep.TLS, &o)
	}
	if w := ep.StandardWebhooks; w != nil {
		s.webhooks = &webhookSigner{now: o.Now}
		for i, ref := range w.Secrets {
			s.webhooks.keys = append(s.webhooks.keys,
				newWebhookKey(key+".standard_webhooks.secrets["+strconv.Itoa(i)+"]", ref, &o))
		}
	}
	if ep.AWSSigV4 != nil {
		s.aws = newAWSSigner(key+".aws_sigv4", ep, &o)
	}
	return s
}

// Sign signs r, the request of one attempt whose body is body, as it is
// about to be sent, on the Options.Now clock: first the Standard Webhooks
// headers (webhook-id from calloutID, "" for a read without a record),
// then AWS Signature Version 4, which so covers them too. It does nothing
// for an endpoint with neither. r's header must be complete: a header set
// after Sign is not in an AWS signature.
//
// Errors: *ConfigError (a secret never loadable, or not a Standard
// Webhooks secret), *Error (matches policy.ErrCredentials: the AWS
// credential chain had no credentials), an error matching
// context.Canceled when ctx was canceled. None carries a value.
func (s *Set) Sign(ctx context.Context, r *http.Request, body []byte, calloutID string) error {
	if s.webhooks != nil {
		if err := s.webhooks.sign(r.Header, body, calloutID); err != nil {
			return err
		}
	}
	if s.aws != nil {
		return s.aws.sign(ctx, r, body)
	}
	return nil
}

// Header returns the endpoint's static headers with their current values
// (nil when it has none). Errors are *ConfigError (a value never loaded, or
// an environment variable unset, empty or with a control character).
func (s *Set) Header() (http.Header, error) {
	if len(s.static) == 0 {
		return nil, nil
	}
	h := make(http.Header, len(s.static))
	for name, sec := range s.static {
		v, err := sec.value()
		if err != nil {
			return nil, err
		}
		h[name] = []string{v}
	}
	return h, nil
}

// OAuth2 reports whether the endpoint authenticates with an OAuth 2.0
// token.
func (s *Set) OAuth2() bool { return s.token != nil }

// Token returns the access token to send now: nil and no error without
// oauth2; otherwise the cached token while fresh, else the result of the
// one token request under way (started if none is), waited for until ctx
// ends. Errors: *Error (matches policy.ErrCredentials: the token endpoint
// failed, or ctx's deadline passed first), *ConfigError, an error matching
// context.Canceled when ctx was canceled, or the token client's transport
// error for a dial it refused (the SSRF guard's; the caller maps it).
func (s *Set) Token(ctx context.Context) (*Token, error) {
	if s.token == nil {
		return nil, nil
	}
	return s.token.token(ctx)
}

// Unauthorized tells the set that the upstream answered 401 to a request
// carrying t (RFC 6750 §3.1 invalid_token): t is dropped so the next Token
// fetches a new one, unless a newer token already replaced it. A nil t
// does nothing.
func (s *Set) Unauthorized(t *Token) {
	if s.token != nil && t != nil {
		s.token.unauthorized(t)
	}
}

// TLS returns the endpoint's client certificate and CA bundle as they are
// now; the zero TLS when it configures none. Errors are *ConfigError (a
// file never loaded).
func (s *Set) TLS() (TLS, error) {
	if s.tls == nil {
		return TLS{}, nil
	}
	return s.tls.get()
}
