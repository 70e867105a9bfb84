package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// awsSigner signs with AWS Signature Version 4 through the AWS SDK for Go
// v2's signer (aws/signer/v4, "Signing AWS API requests" in the IAM User
// Guide), with static credentials from the configuration or the standard
// credential chain.
type awsSigner struct {
	endpoint string
	cfg      config.AWSSigV4
	now      func() time.Time
	logger   *slog.Logger
	signer   *v4.Signer

	// Static credentials (nil without them: the chain).
	accessKeyID, secretAccessKey, sessionToken *secret

	mu    sync.Mutex
	chain aws.CredentialsProvider // the chain's cached provider, once loaded
}

func newAWSSigner(key string, ep *config.Endpoint, o *Options) *awsSigner {
	a := ep.AWSSigV4
	s := &awsSigner{endpoint: ep.Name, cfg: *a, now: o.Now, logger: o.Logger,
		signer: v4.NewSigner(func(so *v4.SignerOptions) {
			// S3 signs the path as sent; every other service escapes it once
			// more (the SDK's S3 client sets the same option).
			so.DisableURIPathEscaping = a.Service == "s3"
		})}
	if a.Static() {
		s.accessKeyID = newSecret(key+".access_key_id", a.AccessKeyID, o)
		s.secretAccessKey = newSecret(key+".secret_access_key", a.SecretAccessKey, o)
		if a.SessionToken.Env != "" || a.SessionToken.File != "" {
			s.sessionToken = newSecret(key+".session_token", a.SessionToken, o)
		}
	}
	return s
}

// credentials returns the credentials to sign with now: the configured
// ones as they are now, or the chain's (cached by the SDK until shortly
// before they expire). Errors: *ConfigError for a configured secret, *Error
// (matches policy.ErrCredentials) when the chain has none or its source
// failed, an error matching context.Canceled when ctx was.
func (s *awsSigner) credentials(ctx context.Context) (aws.Credentials, error) {
	if s.accessKeyID != nil {
		c := aws.Credentials{Source: "callout-proxy configuration"}
		var err error
		if c.AccessKeyID, err = s.accessKeyID.value(); err != nil {
			return aws.Credentials{}, err
		}
		if c.SecretAccessKey, err = s.secretAccessKey.value(); err != nil {
			return aws.Credentials{}, err
		}
		if s.sessionToken != nil {
			if c.SessionToken, err = s.sessionToken.value(); err != nil {
				return aws.Credentials{}, err
			}
		}
		return c, nil
	}
	p, err := s.provider(ctx)
	if err == nil {
		var c aws.Credentials
		if c, err = p.Retrieve(ctx); err == nil {
			return c, nil
		}
	}
	if errors.Is(err, context.Canceled) {
		return aws.Credentials{}, err
	}
	s.logger.Warn("aws credentials unavailable", slog.String("endpoint", s.endpoint), slog.Any("error", err))
	return aws.Credentials{}, &Error{Endpoint: s.endpoint, Credential: "aws credentials", Err: err}
}

// provider loads the standard chain once (config.LoadDefaultConfig: the
// process environment, shared config and credentials files, web identity,
// container and EC2 instance roles); a failed load is tried again by the
// next attempt.
func (s *awsSigner) provider(ctx context.Context) (aws.CredentialsProvider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chain != nil {
		return s.chain, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(s.cfg.Region))
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, errors.New("the AWS credential chain found no credentials")
	}
	s.chain = cfg.Credentials
	return s.chain, nil
}

// sign signs r (whose body is body) at the signing time now: the SDK sets
// X-Amz-Date, Authorization and, with a session token,
// X-Amz-Security-Token; X-Amz-Content-Sha256 carries the body's SHA-256,
// which the signature covers. A caller's X-Amz-Security-Token is removed
// first, so only the proxy's credentials sign.
func (s *awsSigner) sign(ctx context.Context, r *http.Request, body []byte) error {
	c, err := s.credentials(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	// The signer writes its canonical form of the query into
	// r.URL.RawQuery (sorted, re-encoded, dropping what url.ParseQuery
	// cannot read). The upstream gets the query as the caller sent it
	// (contract §4: url + /path?query), so it is put back after signing;
	// a query that url.ParseQuery cannot read losslessly (a ';' separator,
	// a bad %-escape) cannot be signed faithfully and is refused instead
	// of being sent altered.
	raw := r.URL.RawQuery
	if _, err := url.ParseQuery(raw); err != nil {
		return &QueryError{Err: fmt.Errorf("aws_sigv4 of endpoint %s: the query cannot be signed as sent: %w", s.endpoint, err)}
	}
	r.Header.Del("X-Amz-Security-Token")
	r.Header.Set("X-Amz-Content-Sha256", hash)
	if err := s.signer.SignHTTP(ctx, c, r, hash, s.cfg.Service, s.cfg.Region, s.now()); err != nil {
		return &ConfigError{Err: errors.New("aws_sigv4 of endpoint " + s.endpoint + ": the request could not be signed")}
	}
	r.URL.RawQuery = raw
	return nil
}
