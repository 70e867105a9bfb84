package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"io"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// session is one logged-in browser: the admin token it presents to the
// API, that token's name and scope, and its CSRF token.
type session struct {
	// token is the admin token's value, the API's bearer; never logged or
	// rendered.
	token string
	// name and scope are the token's, as Tokens.Check found them at login.
	name  string
	scope auth.Scope
	// csrf is the value every form of this session posts back.
	csrf    string
	created time.Time
	expires time.Time
	// checked is the Tokens that last found the token with name and scope:
	// a console on other Tokens (a reload's) checks it again (lookup).
	checked Tokens
}

// canWrite reports whether the session's token had scope write at login:
// the console then shows write buttons. The API decides every write.
func (s *session) canWrite() bool { return s.scope.Includes(auth.ScopeWrite) }

// sessionKey is the SHA-256 of a session cookie's value: the map key, so
// the value itself is not kept.
type sessionKey [sha256.Size]byte

// Sessions are the live console sessions of this replica. Each token has
// at most perToken; the oldest goes when a login would pass that, so one
// token's logins never end another token's sessions. Expired sessions are
// dropped when met and at every login. One Sessions outlives the consoles
// built on it (Deps.Sessions): a reload's new admin handler keeps every
// session whose token the new configuration still has with the same name
// and scope, checked on the session's next request; the others end
// (docs/console.md, "Sessions and reloads"). Safe for concurrent use.
type Sessions struct {
	lifetime time.Duration
	perToken int
	mu       sync.Mutex
	byKey    map[sessionKey]*session
}

// NewSessions returns an empty set of sessions, each lasting lifetime
// after its login (DefaultSessionLifetime when not positive), at most
// perToken live ones per token (DefaultMaxSessionsPerToken when not
// positive).
func NewSessions(lifetime time.Duration, perToken int) *Sessions {
	if lifetime <= 0 {
		lifetime = DefaultSessionLifetime
	}
	if perToken <= 0 {
		perToken = DefaultMaxSessionsPerToken
	}
	return &Sessions{lifetime: lifetime, perToken: perToken, byKey: map[sessionKey]*session{}}
}

// cookieValueBytes is the size of a session cookie's random value, and of
// a CSRF token (256 bits).
const cookieValueBytes = 32

// randomValue reads cookieValueBytes from rnd, base64url.
func randomValue(rnd io.Reader) (string, error) {
	b := make([]byte, cookieValueBytes)
	if _, err := io.ReadFull(rnd, b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// create starts a session of the token (value, name, scope, as tokens
// found it) at now and returns its cookie value. Errors: rnd's.
func (ss *Sessions) create(rnd io.Reader, tokens Tokens, value, name string, scope auth.Scope,
	now time.Time) (string, *session, error) {
	cookie, err := randomValue(rnd)
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomValue(rnd)
	if err != nil {
		return "", nil, err
	}
	s := &session{token: value, name: name, scope: scope, csrf: csrf, created: now, expires: now.Add(ss.lifetime),
		checked: tokens}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var oldest sessionKey
	var found *session
	n := 0
	for k, o := range ss.byKey {
		if !now.Before(o.expires) {
			delete(ss.byKey, k)
			continue
		}
		if o.name != name {
			continue
		}
		n++
		if found == nil || o.created.Before(found.created) {
			oldest, found = k, o
		}
	}
	if n >= ss.perToken && found != nil {
		delete(ss.byKey, oldest)
	}
	ss.byKey[sha256.Sum256([]byte(cookie))] = s
	return cookie, s, nil
}

// lookup returns the live session of a cookie value at now, as tokens
// (the console's: the configuration in force) see it. An expired one is
// dropped, and so is one that tokens, when they are not the Tokens that
// last checked it (a reload), no longer find with its name and scope: its
// token was removed, renamed, or its scope changed.
func (ss *Sessions) lookup(cookie string, now time.Time, tokens Tokens) (*session, bool) {
	if cookie == "" {
		return nil, false
	}
	k := sessionKey(sha256.Sum256([]byte(cookie)))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byKey[k]
	if !ok {
		return nil, false
	}
	if !now.Before(s.expires) || (s.checked != tokens && !sameScope(tokens, s)) {
		delete(ss.byKey, k)
		return nil, false
	}
	s.checked = tokens
	return s, true
}

// sameScope reports whether tokens find s's token under s's name with
// s's scope, no more and no less.
func sameScope(tokens Tokens, s *session) bool {
	bearer := "Bearer " + s.token
	name, err := tokens.Check(bearer, auth.ScopeRead)
	if err != nil || name != s.name {
		return false
	}
	_, err = tokens.Check(bearer, auth.ScopeWrite)
	return (err == nil) == s.canWrite()
}

// end ends the session of a cookie value (logout).
func (ss *Sessions) end(cookie string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byKey, sha256.Sum256([]byte(cookie)))
}

// count is the number of sessions held, live or not yet dropped.
func (ss *Sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byKey)
}

// sameToken compares two secret strings in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
