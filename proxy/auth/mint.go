package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MintHS256 makes a short-lived HS256 caller token for development and
// smoke tests (`callout-proxy token`), shaped like a Salesforce Named
// Credential token: `iss`, `aud`, `sub`, iat = nbf = now, exp = now +
// lifetime, all NumericDates in whole seconds (RFC 7519 §2). A Verifier with
// HS256 allowed, the same secret, issuer and audience, and a
// max_token_lifetime of at least lifetime accepts it until exp (plus leeway).
//
// It returns an error when secret is shorter than MinSecretBytes (RFC 7518
// §3.2), issuer or audience is empty, or lifetime is under one second. The error
// never contains the secret.
func MintHS256(secret []byte, issuer, audience, subject string, lifetime time.Duration, now time.Time) (string, error) {
	switch {
	case len(secret) < MinSecretBytes:
		return "", fmt.Errorf("auth: HS256 secret is %d bytes; at least %d required (RFC 7518 §3.2)",
			len(secret), MinSecretBytes)
	case issuer == "":
		return "", errors.New("auth: issuer is required")
	case audience == "":
		return "", errors.New("auth: audience is required")
	case lifetime < time.Second:
		return "", fmt.Errorf("auth: token lifetime %s is under 1s (NumericDates are whole seconds)", lifetime)
	}
	claims := NamedCredentialClaims(issuer, audience, subject, now, lifetime)
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// NamedCredentialClaims returns the registered claims of a Salesforce Named
// Credential token: `iss`, `aud` (one value), `sub`, iat = nbf = issuedAt
// and exp = iat + lifetime, NumericDates in whole seconds (RFC 7519 §2:
// issuedAt is truncated to the second, then lifetime added and the sum
// truncated).
func NamedCredentialClaims(issuer, audience, subject string, issuedAt time.Time, lifetime time.Duration) jwt.RegisteredClaims {
	at := jwt.NewNumericDate(issuedAt)
	return jwt.RegisteredClaims{
		Issuer:    issuer,
		Subject:   subject,
		Audience:  jwt.ClaimStrings{audience},
		IssuedAt:  at,
		NotBefore: at,
		ExpiresAt: jwt.NewNumericDate(at.Add(lifetime)),
	}
}
