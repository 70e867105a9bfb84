package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
)

// StandardWebhooks makes the proxy sign every attempt to the endpoint the
// Standard Webhooks way (Standard Webhooks specification v1.0.0, "Signature
// scheme" and "Webhook headers"): `webhook-id` (stable per callout),
// `webhook-timestamp` (the attempt's signing time, Unix seconds) and
// `webhook-signature` (one signature per secret, space-separated).
type StandardWebhooks struct {
	// Secrets are where the signing secrets are: {env: VAR} or {file: PATH},
	// one to MaxWebhookSecrets. Every listed secret signs every attempt, so
	// a rotation lists the old and the new secret until the receiver trusts
	// the new one. A value is `whsec_` + standard base64 of 24 to 64 random
	// bytes (HMAC-SHA256, signature `v1,…`), or `whsk_` + standard base64 of
	// an Ed25519 private key — its 32-byte seed or the 64-byte seed and
	// public key (signature `v1a,…`). A file is re-read when it changes.
	Secrets []SecretRef `yaml:"secrets"`
}

// MaxWebhookSecrets bounds standard_webhooks.secrets: a rotation needs two;
// a few more cover overlapping rotations without an unbounded header.
const MaxWebhookSecrets = 4

// Webhook signature schemes (Standard Webhooks specification v1.0.0,
// "Signature scheme": the signature identifier).
const (
	// WebhookHMAC is `v1`: HMAC-SHA256 with a `whsec_` secret.
	WebhookHMAC = "v1"
	// WebhookEd25519 is `v1a`: Ed25519 with a `whsk_` private key.
	WebhookEd25519 = "v1a"
)

// WebhookKey is one parsed standard_webhooks secret.
type WebhookKey struct {
	// Scheme is WebhookHMAC or WebhookEd25519.
	Scheme string
	// HMAC is the HMAC-SHA256 key (WebhookHMAC).
	HMAC []byte
	// Ed25519 is the private key (WebhookEd25519).
	Ed25519 ed25519.PrivateKey
}

// ParseWebhookKey parses a standard_webhooks secret value: `whsec_` +
// base64 of 24 to 64 bytes (the specification: "at least 24 bytes … 512
// maximum" bits), or `whsk_` + base64 of a 32-byte Ed25519 seed or a
// 64-byte private key whose public half matches its seed. Errors never
// quote the value.
func ParseWebhookKey(v string) (WebhookKey, error) {
	if rest, ok := strings.CutPrefix(v, "whsec_"); ok {
		b, err := base64.StdEncoding.DecodeString(rest)
		switch {
		case err != nil:
			return WebhookKey{}, errors.New("the part after whsec_ is not standard base64")
		case len(b) < 24 || len(b) > 64:
			return WebhookKey{}, errors.New("a whsec_ secret must decode to 24 to 64 bytes")
		}
		return WebhookKey{Scheme: WebhookHMAC, HMAC: b}, nil
	}
	if rest, ok := strings.CutPrefix(v, "whsk_"); ok {
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return WebhookKey{}, errors.New("the part after whsk_ is not standard base64")
		}
		switch len(b) {
		case ed25519.SeedSize:
			return WebhookKey{Scheme: WebhookEd25519, Ed25519: ed25519.NewKeyFromSeed(b)}, nil
		case ed25519.PrivateKeySize:
			k := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
			if !k.Equal(ed25519.PrivateKey(b)) {
				return WebhookKey{}, errors.New("the whsk_ key's public half does not match its seed")
			}
			return WebhookKey{Scheme: WebhookEd25519, Ed25519: k}, nil
		}
		return WebhookKey{}, errors.New("a whsk_ key must decode to a 32-byte Ed25519 seed or a 64-byte private key")
	}
	return WebhookKey{}, errors.New("not a Standard Webhooks secret: it must start with whsec_ (HMAC-SHA256) or whsk_ (Ed25519)")
}

// AWSSigV4 makes the proxy sign every attempt to the endpoint with AWS
// Signature Version 4 (the AWS SDK for Go v2's aws/signer/v4), payload hash
// included (x-amz-content-sha256), for API Gateway with IAM authorization,
// Lambda function URLs, EventBridge API destinations or S3.
type AWSSigV4 struct {
	// Region is the signing region, e.g. eu-west-1.
	Region string `yaml:"region"`
	// Service is the signing service name, e.g. execute-api, lambda, s3.
	Service string `yaml:"service"`
	// AccessKeyID and SecretAccessKey are where the static credentials are
	// ({env: VAR} or {file: PATH}); set both or neither. Neither: the
	// standard AWS credential chain (environment, shared files, web
	// identity, container and EC2 instance roles), as
	// config.LoadDefaultConfig of the AWS SDK for Go v2 resolves it.
	AccessKeyID     SecretRef `yaml:"access_key_id"`
	SecretAccessKey SecretRef `yaml:"secret_access_key"`
	// SessionToken, optional with AccessKeyID, is a temporary credential's
	// token, sent as X-Amz-Security-Token.
	SessionToken SecretRef `yaml:"session_token"`
}

// Static reports whether a names static credentials (else the chain).
func (a *AWSSigV4) Static() bool { return a.AccessKeyID.set() || a.SecretAccessKey.set() }

func (s SecretRef) set() bool { return s.Env != "" || s.File != "" }

// SigningHeaders are the request header names the endpoint's signing
// credentials set on every attempt (canonical form): redacted wherever a
// request is shown (contract §7), and refused in its headers block.
func (e *Endpoint) SigningHeaders() []string {
	var h []string
	if e.StandardWebhooks != nil {
		h = append(h, "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature")
	}
	if e.AWSSigV4 != nil {
		h = append(h, "Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256")
	}
	return h
}

// clone returns a copy of w that shares no slice with it; nil for nil.
func (w *StandardWebhooks) clone() *StandardWebhooks {
	if w == nil {
		return nil
	}
	n := StandardWebhooks{Secrets: append([]SecretRef(nil), w.Secrets...)}
	return &n
}
