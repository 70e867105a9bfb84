package salesforce

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// AssertionLifetime is how long a JWT bearer assertion is valid: Salesforce
// accepts an `exp` at most 3 minutes ahead ("OAuth 2.0 JWT Bearer Flow for
// Server-to-Server Integration").
const AssertionLifetime = 3 * time.Minute

// jwtBearerGrant is the grant type of RFC 7523 §2.1.
const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// Token is an access token and the instance it is for.
type Token struct {
	// AccessToken goes in Authorization: Bearer. Never logged.
	AccessToken string
	// InstanceURL is the org's base URL for REST calls, e.g.
	// https://example.my.salesforce.com.
	InstanceURL string
}

// Credentials are what the JWT bearer flow signs with.
type Credentials struct {
	// LoginURL is where tokens are minted and the assertion's `aud`:
	// https://login.salesforce.com, https://test.salesforce.com or a My
	// Domain URL.
	LoginURL string
	// ClientID is the connected app's consumer key (`iss`).
	ClientID string
	// Username is the pre-authorised integration user (`sub`).
	Username string
	// Key signs the assertion (RS256).
	Key *rsa.PrivateKey
}

// Assertion returns the signed JWT bearer assertion for now: RS256 with
// `iss` the consumer key, `sub` the username, `aud` the login URL and `exp`
// AssertionLifetime after now, in seconds (RFC 7523 §3). `aud` is a plain
// string, as Salesforce documents it.
func (c Credentials) Assertion(now time.Time) (string, error) {
	claims := jwt.MapClaims{
		"iss": c.ClientID,
		"sub": c.Username,
		"aud": strings.TrimRight(c.LoginURL, "/"),
		"exp": now.Add(AssertionLifetime).Unix(),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(c.Key)
	if err != nil {
		return "", fmt.Errorf("salesforce: sign JWT bearer assertion: %w", err)
	}
	return s, nil
}

// tokenAnswer is the token endpoint's JSON answer, success or error
// (RFC 6749 §5.1, §5.2).
type tokenAnswer struct {
	AccessToken      string `json:"access_token"`
	InstanceURL      string `json:"instance_url"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// mint posts a fresh assertion to the token endpoint
// (POST {login}/services/oauth2/token, grant_type jwt-bearer). Errors: an
// *Error of class AuthFailed when the endpoint refuses the grant, Retry for
// a 5xx or a network failure.
func (c Credentials) mint(ctx context.Context, hc *http.Client, now time.Time) (Token, *Error) {
	const op = "token"
	assertion, err := c.Assertion(now)
	if err != nil {
		return Token{}, &Error{Op: op, Class: AuthFailed, Err: err}
	}
	form := url.Values{"grant_type": {jwtBearerGrant}, "assertion": {assertion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		strings.TrimRight(c.LoginURL, "/")+"/services/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return Token{}, &Error{Op: op, Class: AuthFailed, Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return Token{}, &Error{Op: op, Class: Retry, Err: redactURLError(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Token{}, &Error{Op: op, Status: resp.StatusCode, Class: Retry, Err: err}
	}
	var a tokenAnswer
	_ = json.Unmarshal(body, &a)
	switch {
	case resp.StatusCode >= 500:
		return Token{}, &Error{Op: op, Status: resp.StatusCode, Code: a.Error, Class: Retry}
	case resp.StatusCode != http.StatusOK || a.Error != "":
		return Token{}, &Error{Op: op, Status: resp.StatusCode, Code: a.Error, Message: a.ErrorDescription,
			Class: AuthFailed}
	case a.AccessToken == "" || !strings.HasPrefix(a.InstanceURL, "https://") && !strings.HasPrefix(a.InstanceURL, "http://"):
		return Token{}, &Error{Op: op, Status: resp.StatusCode, Message: "answer without access_token or instance_url",
			Class: AuthFailed}
	}
	return Token{AccessToken: a.AccessToken, InstanceURL: strings.TrimRight(a.InstanceURL, "/")}, nil
}

// redactURLError drops the URL from a *url.Error: it names only our own
// login or instance URL, but keeping errors free of URLs keeps them free of
// anything a query might carry.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// tokens caches one access token for every goroutine of the process. A
// token is minted on first use and again only when a call found it invalid
// (INVALID_SESSION_ID): Salesforce's JWT bearer answer carries no expiry
// and no refresh token. One goroutine mints at a time; the others wait for
// its result instead of minting their own.
type tokens struct {
	creds Credentials
	http  *http.Client
	now   func() time.Time
	// onMint is told of every mint's outcome (metrics, logs); may be nil.
	onMint func(err *Error)

	mu  sync.Mutex
	cur Token
}

// get returns the cached token, minting one when there is none.
func (t *tokens) get(ctx context.Context) (Token, *Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur.AccessToken != "" {
		return t.cur, nil
	}
	return t.mintLocked(ctx)
}

// renew returns a token other than stale: the cached one when another
// goroutine already replaced stale, else a freshly minted one. Callers that
// saw INVALID_SESSION_ID with stale call it once, then retry once.
func (t *tokens) renew(ctx context.Context, stale Token) (Token, *Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur.AccessToken != "" && t.cur.AccessToken != stale.AccessToken {
		return t.cur, nil
	}
	t.cur = Token{}
	return t.mintLocked(ctx)
}

func (t *tokens) mintLocked(ctx context.Context) (Token, *Error) {
	tok, err := t.creds.mint(ctx, t.http, t.now())
	if t.onMint != nil {
		t.onMint(err)
	}
	if err != nil {
		return Token{}, err
	}
	t.cur = tok
	return tok, nil
}
