package sfapi

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
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
	// OrgID is the org's id (the tenantid the Pub/Sub API wants), the
	// first segment after /id/ of the answer's identity URL `id`
	// ("OAuth 2.0 JWT Bearer Flow for Server-to-Server Integration":
	// https://login.salesforce.com/id/{org id}/{user id}); "" when absent.
	OrgID string
}

// The audiences Salesforce accepts in a JWT bearer assertion ("OAuth 2.0
// JWT Bearer Flow for Server-to-Server Integration": aud is
// https://login.salesforce.com, https://test.salesforce.com, or an
// Experience Cloud site URL), whatever URL the assertion is posted to.
const (
	ProductionAudience = "https://login.salesforce.com"
	SandboxAudience    = "https://test.salesforce.com"
)

// sandboxHost matches the hosts the Salesforce CLI takes for sandboxes
// (@salesforce/core SfdcUrl.isSandboxUrl): an instance cs<N>, with or
// without My Domain (cs42.salesforce.com, acme--uat.cs42.my.salesforce.com).
var sandboxHost = regexp.MustCompile(`(^|\.)cs[0-9]+(\.my)?\.salesforce\.com$`)

// JWTAudience derives a JWT bearer assertion's `aud` from the login URL as
// the Salesforce CLI does (@salesforce/core SfdcUrl.getJwtAudienceUrl):
// a sandbox host — *.sandbox.my.salesforce.com (enhanced domains),
// test.salesforce.com, or a cs<N> instance — gives SandboxAudience;
// anything else (login.salesforce.com, a production My Domain, a
// loopback test server) gives ProductionAudience. An unparsable URL gives
// ProductionAudience too (config validation refuses one). Set
// salesforce.audience when neither fits (an Experience Cloud site, a
// sandbox behind a custom domain).
func JWTAudience(loginURL string) string {
	u, err := url.Parse(loginURL)
	if err != nil {
		return ProductionAudience
	}
	h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if h == "test.salesforce.com" || strings.HasSuffix(h, ".sandbox.my.salesforce.com") || sandboxHost.MatchString(h) {
		return SandboxAudience
	}
	return ProductionAudience
}

// Credentials are what the JWT bearer flow signs with.
type Credentials struct {
	// LoginURL is where tokens are minted: https://login.salesforce.com,
	// https://test.salesforce.com or a My Domain URL.
	LoginURL string
	// Audience, when set, is the assertion's `aud` (salesforce.audience);
	// "" derives it from LoginURL (JWTAudience).
	Audience string
	// ClientID is the connected app's consumer key (`iss`).
	ClientID string
	// Username is the pre-authorised integration user (`sub`).
	Username string
	// Key signs the assertion (RS256).
	Key *rsa.PrivateKey
}

// Assertion returns the signed JWT bearer assertion for now: RS256 with
// `iss` the consumer key, `sub` the username, `aud` the audience
// (Credentials.Audience, else JWTAudience of the login URL) and `exp`
// AssertionLifetime after now, in seconds (RFC 7523 §3). `aud` is a plain
// string, as Salesforce documents it.
func (c Credentials) Assertion(now time.Time) (string, error) {
	claims := jwt.MapClaims{
		"iss": c.ClientID,
		"sub": c.Username,
		"aud": c.audience(),
		"exp": now.Add(AssertionLifetime).Unix(),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(c.Key)
	if err != nil {
		return "", fmt.Errorf("salesforce: sign JWT bearer assertion: %w", err)
	}
	return s, nil
}

// audience is the assertion's `aud`.
func (c Credentials) audience() string {
	if c.Audience != "" {
		return strings.TrimRight(c.Audience, "/")
	}
	return JWTAudience(c.LoginURL)
}

// tokenAnswer is the token endpoint's JSON answer, success or error
// (RFC 6749 §5.1, §5.2).
type tokenAnswer struct {
	AccessToken      string `json:"access_token"`
	InstanceURL      string `json:"instance_url"`
	ID               string `json:"id"`
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
		return Token{}, &Error{Op: op, Class: Retry, Err: RedactURLError(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Token{}, &Error{Op: op, Status: resp.StatusCode, Class: Retry, Err: err}
	}
	var a tokenAnswer
	_ = json.Unmarshal(body, &a)
	if isLoginRate(a.Error) || isLoginRate(a.ErrorDescription) {
		// Salesforce Help "Sign In Error 'Login Rate Exceeded'": above
		// 3,600 logins of one user in an hour the login is blocked;
		// waiting an hour is the documented remedy (tokens).
		return Token{}, &Error{Op: op, Status: resp.StatusCode, Code: loginRateExceeded,
			Message: a.ErrorDescription, Class: AuthFailed}
	}
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
	return Token{AccessToken: a.AccessToken, InstanceURL: strings.TrimRight(a.InstanceURL, "/"), OrgID: orgOf(a.ID)}, nil
}

// orgOf returns the org id of an identity URL .../id/{org id}/{user id}.
func orgOf(identity string) string {
	_, rest, ok := strings.Cut(identity, "/id/")
	if !ok {
		return ""
	}
	org, _, _ := strings.Cut(rest, "/")
	return org
}

// isLoginRate reports whether an OAuth error or its description says the
// user's login rate was exceeded (LOGIN_RATE_EXCEEDED, "Login Rate
// Exceeded"; the help article names both, the token endpoint's exact text
// is not documented, so either matches, in any case).
func isLoginRate(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "login_rate_exceeded") || strings.Contains(s, "login rate exceeded")
}

// RedactURLError drops the URL from a *url.Error (any other error is returned as it is): it names only our own
// login or instance URL, but keeping errors free of URLs keeps them free of
// anything a query might carry.
func RedactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// Token minting under failure ("OAuth 2.0 JWT Bearer Flow for
// Server-to-Server Integration"; Salesforce Help "Sign In Error 'Login Rate
// Exceeded'": more than 3,600 logins of one user in an hour are blocked,
// and the advice is to wait an hour). After a failed mint no goroutine of
// this process mints again before the backoff ends: 1 s, doubling, at most
// 30 s — a revoked app or user that is fixed works again within 30 s, and
// a replica mints at most 120 times an hour while it is broken, far below
// the 3,600 — ; after LOGIN_RATE_EXCEEDED, an hour.
const (
	MintBackoffStart = time.Second
	MintBackoffMax   = 30 * time.Second
	LoginRateWait    = time.Hour
)

// loginRateExceeded is the code a mint refused for the login rate gets.
const loginRateExceeded = "LOGIN_RATE_EXCEEDED"

// tokens caches one access token for every goroutine of the process. A
// token is minted on first use and again only when a call found it invalid
// (INVALID_SESSION_ID): Salesforce's JWT bearer answer carries no expiry
// and no refresh token. Minting is single-flight: one goroutine mints
// while the others wait for its result instead of minting their own, and
// after a failed mint every caller gets that failure, without a request,
// until the backoff ends (MintBackoffStart doubling to MintBackoffMax;
// LoginRateWait after LOGIN_RATE_EXCEEDED).
type tokens struct {
	creds Credentials
	http  *http.Client
	now   func() time.Time
	// onMint is told of every mint's outcome (metrics); may be nil.
	onMint func(err *Error)
	log    *slog.Logger

	mu      sync.Mutex // held while minting
	cur     Token
	fails   int       // consecutive failed mints
	retryAt time.Time // no mint before it after a failure
	lastErr *Error    // the last failed mint's error
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

// mintLocked mints a token, unless a failed mint's backoff has not ended:
// then it returns that failure again without a request.
func (t *tokens) mintLocked(ctx context.Context) (Token, *Error) {
	now := t.now()
	if t.lastErr != nil && now.Before(t.retryAt) {
		e := *t.lastErr
		e.Message = fmt.Sprintf("%s (no new token request before %s)", e.Message, t.retryAt.UTC().Format(time.RFC3339))
		return Token{}, &e
	}
	tok, err := t.creds.mint(ctx, t.http, now)
	if t.onMint != nil {
		t.onMint(err)
	}
	if err != nil {
		t.fails++
		wait := MintBackoffMax
		if t.fails <= 20 {
			wait = min(MintBackoffStart<<(t.fails-1), MintBackoffMax)
		}
		if err.Code == loginRateExceeded {
			wait = LoginRateWait
		}
		if t.fails == 1 || t.lastErr == nil || t.lastErr.Code != err.Code {
			t.log.Error("Salesforce token request failed (JWT bearer flow); retrying with backoff",
				slog.String("code", err.Code), slog.String("description", err.Message),
				slog.String("fix", mintHint(err.Code)), slog.Time("retry_at", now.Add(wait)), slog.Any("error", err))
		}
		t.retryAt, t.lastErr = now.Add(wait), err
		return Token{}, err
	}
	if t.fails > 0 {
		t.log.Info("Salesforce token minted again", slog.Int("failed_mints", t.fails))
	}
	t.cur, t.fails, t.retryAt, t.lastErr = tok, 0, time.Time{}, nil
	return tok, nil
}

// mintHint says what usually fixes a refused token request.
func mintHint(code string) string {
	switch code {
	case loginRateExceeded:
		return "the integration user logged in more than 3,600 times in an hour; the proxy waits an hour " +
			"(find what else logs in as this user: Setup > Login History)"
	case "invalid_grant":
		return "check that the connected app's certificate matches salesforce.private_key_file, that the user " +
			"is pre-authorized (Admin approved users; profile or permission set Callout_Proxy_Integration), " +
			"salesforce.username, and the JWT audience (salesforce.audience; test.salesforce.com for a sandbox)"
	case "invalid_client", "invalid_client_id":
		return "check the consumer key in salesforce.client_id_env"
	}
	return "Salesforce or the network failed; the request is retried"
}
