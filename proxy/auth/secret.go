package auth

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// MinSecretBytes is the shortest HS256 secret accepted, in bytes: RFC 7518
// §3.2 requires an HMAC key at least as long as the hash output (256 bits).
const MinSecretBytes = config.MinHS256SecretBytes

// loadHS256Secret resolves the HS256 secret of auth: (config.Auth.HS256Secret:
// the environment variable or the file, one trailing newline trimmed) and
// checks it is long enough and not a PEM block — the classic RS/HS
// confusion is a public key used as an HMAC secret. Errors never contain the
// value.
func loadHS256Secret(cfg config.Auth, getenv func(string) string) ([]byte, error) {
	secret, err := cfg.HS256Secret(getenv)
	if err != nil {
		return nil, err
	}
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("auth: HS256 secret is %d bytes; at least %d required (RFC 7518 §3.2)",
			len(secret), MinSecretBytes)
	}
	if bytes.Contains(secret, []byte("-----BEGIN")) {
		return nil, errors.New("auth: HS256 secret is a PEM block; a certificate or key must never be an HMAC secret")
	}
	return secret, nil
}
