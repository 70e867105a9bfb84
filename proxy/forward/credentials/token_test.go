package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

const tokenValue = "access-token-VALUE-123"

// oauthToken builds what the oauth2 package returns for a JSON answer with
// the given fields.
func oauthToken(t *testing.T, fields map[string]any) *oauth2.Token {
	t.Helper()
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	var extra map[string]any
	if err := json.Unmarshal(raw, &extra); err != nil {
		t.Fatal(err)
	}
	tok := &oauth2.Token{AccessToken: tokenValue, TokenType: fmt.Sprint(fields["token_type"])}
	return tok.WithExtra(extra)
}

// TestNewToken: expiry is started + expires_in on the injected clock
// (number or string), refresh comes min(30 s, half the lifetime) earlier,
// an absent or nonsensical expires_in means no expiry, and an access token
// that cannot go in a header is refused.
func TestNewToken(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		expiresIn any // nil: absent
		expiry    time.Duration
		refresh   time.Duration // from started; 0 with expiry 0
	}{
		{"one hour", 3600, time.Hour, time.Hour - 30*time.Second},
		{"string", "3600", time.Hour, time.Hour - 30*time.Second},
		{"string with spaces", " 120 ", 2 * time.Minute, 90 * time.Second},
		{"short-lived", 20, 20 * time.Second, 10 * time.Second},
		{"fraction", 1.5, 1500 * time.Millisecond, 750 * time.Millisecond},
		{"absent", nil, 0, 0},
		{"zero", 0, 0, 0},
		{"negative", -5, 0, 0},
		{"not a number", "soon", 0, 0},
		{"absurd", 1e12, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fields := map[string]any{"access_token": tokenValue, "token_type": "bearer"}
			if tt.expiresIn != nil {
				fields["expires_in"] = tt.expiresIn
			}
			tok, err := newToken("a", oauthToken(t, fields), started)
			if err != nil {
				t.Fatal(err)
			}
			wantExpiry, wantRefresh := time.Time{}, time.Time{}
			if tt.expiry != 0 {
				wantExpiry, wantRefresh = started.Add(tt.expiry), started.Add(tt.refresh)
			}
			if !tok.expiry.Equal(wantExpiry) || !tok.refreshAt.Equal(wantRefresh) {
				t.Errorf("expiry, refresh = %v, %v; want %v, %v", tok.expiry, tok.refreshAt, wantExpiry, wantRefresh)
			}
			h := http.Header{}
			tok.SetHeader(h)
			if h.Get("Authorization") != "Bearer "+tokenValue {
				t.Errorf("Authorization = %q", h.Get("Authorization"))
			}
		})
	}
	bad := &oauth2.Token{AccessToken: "a b", TokenType: "bearer"}
	if _, err := newToken("a", bad, started); !errors.Is(err, policy.ErrCredentials) || strings.Contains(err.Error(), "a b") {
		t.Errorf("a token with a space: err = %v", err)
	}
}

// TestTokenNeverPrints: every way of printing or logging a Token hides its
// value.
func TestTokenNeverPrints(t *testing.T) {
	tok := &Token{typ: "Bearer", value: tokenValue}
	logs := &proctest.LogBuffer{}
	slog.New(slog.NewJSONHandler(logs, nil)).Info("x", "token", tok, "any", any(tok))
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%+v %#v %s %q", tok, tok, tok, tok), logs.String()} {
		if strings.Contains(s, tokenValue) {
			t.Errorf("printed token: %s", s)
		}
	}
}

// TestTokenError: what the token endpoint or the transport said becomes an
// Error matching policy.ErrCredentials, without the response body (which
// may echo a secret) or the token URL.
func TestTokenError(t *testing.T) {
	resp := &http.Response{StatusCode: 401, Status: "401 Unauthorized"}
	tests := []struct {
		name   string
		err    error
		want   string
		status int
	}{
		{"error answer", &oauth2.RetrieveError{Response: resp, Body: []byte(`{"error":"invalid_client","error_description":"secret s3cr3t"}`),
			ErrorCode: "invalid_client", ErrorDescription: "secret s3cr3t"}, `the token endpoint answered 401 with error "invalid_client"`, 401},
		{"no error code", &oauth2.RetrieveError{Response: resp, Body: []byte("s3cr3t")}, "the token endpoint answered 401", 401},
		{"long code", &oauth2.RetrieveError{Response: resp, ErrorCode: strings.Repeat("x", 100)},
			`with error "` + strings.Repeat("x", maxErrorCode) + `"`, 401},
		{"transport", &url.Error{Op: "Post", URL: "https://auth.example.com/token?key=s3cr3t", Err: errors.New("connection refused")},
			"connection refused", 0},
		{"deadline", &url.Error{Op: "Post", URL: "https://auth.example.com/token?key=s3cr3t", Err: context.DeadlineExceeded},
			"no answer from the token endpoint in time", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tokenError("pay", tt.err)
			msg := e.Error()
			if !strings.HasPrefix(msg, "oauth2 token for endpoint pay: ") || !strings.Contains(msg, tt.want) ||
				strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "auth.example.com") {
				t.Errorf("Error() = %q, want it to contain %q and no body or URL", msg, tt.want)
			}
			if e.Status != tt.status || !errors.Is(e, policy.ErrCredentials) {
				t.Errorf("Status = %d, Is ErrCredentials = %v", e.Status, errors.Is(e, policy.ErrCredentials))
			}
		})
	}
}
