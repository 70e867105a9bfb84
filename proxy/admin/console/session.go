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
}

// canWrite reports whether the session's token had scope write at login:
// the console then shows write buttons. The API decides every write.
func (s *session) canWrite() bool { return s.scope.Includes(auth.ScopeWrite) }

// sessionKey is the SHA-256 of a session cookie's value: the map key, so
// the value itself is not kept.
type sessionKey [sha256.Size]byte

// sessions are the live sessions of this replica. Each token has at most
// perToken; the oldest goes when a login would pass that, so one token's
// logins never end another token's sessions. Expired sessions are dropped
// when met and at every login. Safe for concurrent use.
type sessions struct {
	lifetime time.Duration
	perToken int
	mu       sync.Mutex
	byKey    map[sessionKey]*session
}

func newSessions(lifetime time.Duration, perToken int) *sessions {
	return &sessions{lifetime: lifetime, perToken: perToken, byKey: map[sessionKey]*session{}}
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

// create starts a session of the token (value, name, scope) at now and
// returns its cookie value. Errors: rnd's.
func (ss *sessions) create(rnd io.Reader, value, name string, scope auth.Scope, now time.Time) (string, *session, error) {
	cookie, err := randomValue(rnd)
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomValue(rnd)
	if err != nil {
		return "", nil, err
	}
	s := &session{token: value, name: name, scope: scope, csrf: csrf, created: now, expires: now.Add(ss.lifetime)}
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

// lookup returns the live session of a cookie value at now; an expired one
// is dropped.
func (ss *sessions) lookup(cookie string, now time.Time) (*session, bool) {
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
	if !now.Before(s.expires) {
		delete(ss.byKey, k)
		return nil, false
	}
	return s, true
}

// end ends the session of a cookie value (logout).
func (ss *sessions) end(cookie string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byKey, sha256.Sum256([]byte(cookie)))
}

// count is the number of sessions held, live or not yet dropped.
func (ss *sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byKey)
}

// sameToken compares two secret strings in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
