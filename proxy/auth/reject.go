package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// unauthorized returns a 401 problem with detail.
func unauthorized(detail string) *problem.Error {
	return problem.Errorf(problem.Unauthorized, detail)
}

// reject turns a jwt parse error into an Unauthorized problem whose detail
// names the failed check. tok and c hold what the parser decoded before it
// failed (tok may be nil). The jwt error is kept as the cause for logs; it
// never carries the token or the key material.
func (v *Verifier) reject(tok *jwt.Token, c *jwt.RegisteredClaims, err error) error {
	detail := v.rejectDetail(tok, c, err)
	return problem.Wrap(problem.Unauthorized, detail, err)
}

// rejectDetail picks the detail for a parse error, most basic cause first.
func (v *Verifier) rejectDetail(tok *jwt.Token, c *jwt.RegisteredClaims, err error) string {
	if errors.Is(err, jwt.ErrTokenMalformed) || tok == nil {
		return "malformed token: not a compact JWS (three base64url segments, JSON header and claims)"
	}
	alg, ok := tok.Header["alg"].(string)
	switch {
	case !ok:
		return "token header has no alg"
	case !slices.Contains(v.algorithms, alg):
		return fmt.Sprintf("algorithm %s is not accepted", quote(alg))
	case errors.Is(err, errCrit):
		return critDetail(tok.Header["crit"])
	case errors.Is(err, errIssuer) && c.Issuer == "":
		return "token has no iss claim"
	case errors.Is(err, errIssuer):
		return fmt.Sprintf("issuer %s is not allowed", quote(c.Issuer))
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, errNoKey):
		return v.signatureDetail(alg, c.Issuer)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return fmt.Sprintf("token signed with %s cannot be verified", alg)
	}
	return claimsDetail(c, err)
}

// signatureDetail says which kind of key material, bound to which issuer,
// the signature failed against, not how much of it is configured (nor
// whether the issuer has any: no key of the kind reads the same).
func (v *Verifier) signatureDetail(alg, iss string) string {
	if alg == HS256 {
		return fmt.Sprintf("invalid signature: HS256 signature does not verify with the secret of issuer %s", quote(iss))
	}
	return fmt.Sprintf("invalid signature: %s signature does not verify under any certificate of issuer %s", alg, quote(iss))
}

// errCrit is keyFor's refusal of a token with a `crit` header.
var errCrit = errors.New("crit header names extensions this verifier does not understand")

// maxCritNames bounds how many `crit` names a detail lists.
const maxCritNames = 5

// critDetail describes a refused `crit` header (RFC 7515 §4.1.11): the
// proxy understands no JWS extension, so every name listed is unknown, and
// a crit that is not a non-empty list of names is malformed.
func critDetail(crit any) string {
	list, ok := crit.([]any)
	if !ok || len(list) == 0 {
		return "token header crit must be a non-empty list of extension names (RFC 7515 §4.1.11)"
	}
	var names []string
	for i, n := range list {
		if i == maxCritNames {
			names = append(names, "…")
			break
		}
		s, _ := n.(string)
		names = append(names, quote(s))
	}
	return fmt.Sprintf("token header crit [%s] names extensions this proxy does not understand; "+
		"a JWS whose crit is not understood must be refused (RFC 7515 §4.1.11)", strings.Join(names, ", "))
}

// maxAudiences bounds how many `aud` values a detail lists.
const maxAudiences = 5

// claimsDetail describes a failed registered-claims check (RFC 7519 §4.1)
// by what the token says, never by what the proxy is configured to expect.
func claimsDetail(c *jwt.RegisteredClaims, err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired at " + stamp(c.ExpiresAt)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet: nbf is " + stamp(c.NotBefore)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token issued in the future: iat is " + stamp(c.IssuedAt)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && c.ExpiresAt == nil:
		return "token has no exp claim"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "token has no aud claim"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		var auds []string
		for i, a := range c.Audience {
			if i == maxAudiences {
				auds = append(auds, "…")
				break
			}
			auds = append(auds, quote(a))
		}
		return fmt.Sprintf("audience [%s] is not accepted", strings.Join(auds, ", "))
	}
	return "token rejected: invalid claims"
}

// stamp formats a NumericDate as RFC 3339 UTC ("2026-11-29T10:00:00Z").
func stamp(d *jwt.NumericDate) string {
	if d == nil {
		return "absent"
	}
	return d.UTC().Format(time.RFC3339)
}
