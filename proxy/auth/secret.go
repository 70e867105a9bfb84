package auth

import (
	"bytes"
	"fmt"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// MinSecretBytes is the shortest HS256 secret accepted, in bytes: RFC 7518
// §3.2 requires an HMAC key at least as long as the hash output (256 bits).
const MinSecretBytes = config.MinHS256SecretBytes

// loadHS256Secret resolves the HS256 secret of one key binding (the
// environment variable or the file, one trailing newline trimmed; see
// config.SecretRef.Resolve) and checks it is long enough and not a PEM
// block — the classic RS/HS confusion is a public key used as an HMAC
// secret. Errors name the configuration key, never the value.
func loadHS256Secret(b config.IssuerKeys, getenv func(string) string) ([]byte, error) {
	v, err := b.HS256Ref().Resolve(getenv)
	if err != nil {
		return nil, fmt.Errorf("%s HS256 secret: %w", b.Path(), err)
	}
	secret := []byte(v)
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("%s: HS256 secret is %d bytes; at least %d required (RFC 7518 §3.2)",
			b.Path(), len(secret), MinSecretBytes)
	}
	if bytes.Contains(secret, []byte("-----BEGIN")) {
		return nil, fmt.Errorf("%s: HS256 secret is a PEM block; a certificate or key must never be an HMAC secret", b.Path())
	}
	return secret, nil
}
