package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// Scope is what an admin token may do on the admin API (contract §9).
type Scope string

// The admin scopes. ScopeWrite includes ScopeRead.
const (
	// ScopeRead allows GET on /admin/v1/.
	ScopeRead Scope = config.ScopeRead
	// ScopeWrite allows every admin action (replay, enable, disable, reset)
	// and everything ScopeRead allows.
	ScopeWrite Scope = config.ScopeWrite
)

// ParseScope parses a config scope, "read" or "write"; anything else is an
// error.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeRead, ScopeWrite:
		return sc, nil
	}
	return "", fmt.Errorf("scope %q is not read or write", s)
}

// Includes reports whether a token of scope s may do what needs need:
// write includes read; an unknown scope includes nothing.
func (s Scope) Includes(need Scope) bool {
	switch s {
	case ScopeWrite:
		return need == ScopeRead || need == ScopeWrite
	case ScopeRead:
		return need == ScopeRead
	}
	return false
}

// MinAdminTokenBytes is the shortest admin token value accepted, in bytes
// (128 bits): admin tokens are long random strings, never passwords.
const MinAdminTokenBytes = config.MinAdminTokenBytes

// AdminTokens checks the admin API's named bearer tokens. Only SHA-256
// digests of the values are kept. It is safe for concurrent use and holds no
// mutable state.
type AdminTokens struct {
	tokens []adminToken
}

// adminToken is one configured token: its name, scope and value digest.
type adminToken struct {
	name   string
	scope  Scope
	digest [sha256.Size]byte
}

// NewAdminTokens resolves every token of cfg (contract §9, §10 `admin:`)
// with config.AdminToken.Value: getenv(TokenEnv) or the file TokenFile (one
// trailing newline trimmed); a nil getenv means os.Getenv. It returns an error naming admin.tokens[i] when a name
// is empty or repeated, a value is missing, shorter than MinAdminTokenBytes
// or shared with another token, or the scope is not read or write. No
// tokens is valid: every Check then fails with 401.
func NewAdminTokens(cfg config.Admin, getenv func(string) string) (*AdminTokens, error) {
	a := &AdminTokens{}
	names := map[string]bool{}
	digests := map[[sha256.Size]byte]bool{}
	for i, t := range cfg.Tokens {
		key := fmt.Sprintf("admin.tokens[%d]", i)
		if t.Name == "" {
			return nil, fmt.Errorf("%s.name: required", key)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("%s.name: %q is used twice", key, t.Name)
		}
		names[t.Name] = true
		scope, err := ParseScope(t.Scope)
		if err != nil {
			return nil, fmt.Errorf("%s.scope: %w", key, err)
		}
		value, err := t.Value(getenv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if len(value) < MinAdminTokenBytes {
			return nil, fmt.Errorf("%s: token %q is %d bytes; at least %d required",
				key, t.Name, len(value), MinAdminTokenBytes)
		}
		d := sha256.Sum256([]byte(value))
		if digests[d] {
			return nil, fmt.Errorf("%s: token %q has the same value as another token", key, t.Name)
		}
		digests[d] = true
		a.tokens = append(a.tokens, adminToken{name: t.Name, scope: scope, digest: d})
	}
	return a, nil
}

// Check authenticates an Authorization header value, `Bearer <token>`
// (RFC 6750 §2.1), and authorises it for need. It returns the token's name
// for the audit log.
//
// The presented value is hashed with SHA-256 and compared with every
// configured digest using crypto/subtle, without stopping at a match, so the
// time taken reveals neither which token matched nor the value's length.
//
// Errors are *problem.Error: Unauthorized for a missing, non-Bearer or
// unknown token; Forbidden, naming the token and both scopes, when its scope
// does not include need; Internal when need is not a known Scope.
func (a *AdminTokens) Check(authorization string, need Scope) (name string, err error) {
	if need != ScopeRead && need != ScopeWrite {
		return "", problem.Errorf(problem.Internal, fmt.Sprintf("unknown admin scope %q", need))
	}
	raw, err := bearerToken(authorization)
	if err != nil {
		return "", err
	}
	d := sha256.Sum256([]byte(raw))
	match := -1
	for i := range a.tokens {
		eq := subtle.ConstantTimeCompare(d[:], a.tokens[i].digest[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return "", problem.Errorf(problem.Unauthorized, "unknown admin token")
	}
	t := a.tokens[match]
	if !t.scope.Includes(need) {
		return "", problem.Errorf(problem.Forbidden,
			fmt.Sprintf("admin token %q has scope %s; this action needs %s", t.name, t.scope, need))
	}
	return t.name, nil
}
