package sfemu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxAssertionLifetime is Salesforce's limit on a JWT bearer assertion's
// exp, with one second of leeway for the test's clock arithmetic.
const maxAssertionLifetime = 3*time.Minute + time.Second

// token is POST /services/oauth2/token: the JWT bearer flow (RFC 7523).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	w, handled, drop := s.fault(w, r, "token")
	if handled {
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request", "unreadable form")
		return
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthError(w, "unsupported_grant_type", "grant type not supported")
		return
	}
	if why := s.checkAssertion(r.PostForm.Get("assertion")); why != "" {
		oauthError(w, "invalid_grant", why)
		return
	}
	if !s.loginAllowed() {
		// Salesforce Help "Sign In Error 'Login Rate Exceeded'": logins
		// of one user above 3,600 an hour are blocked (LOGIN_RATE_EXCEEDED
		// in Login History). The body has RFC 6749 §5.2's shape, as every
		// refusal of the token endpoint ("OAuth 2.0 Authorization Errors").
		oauthError(w, "invalid_grant", "Login Rate Exceeded")
		return
	}
	s.mu.Lock()
	s.tokenSeq++
	tok := fmt.Sprintf("00DEMU!token-%d", s.tokenSeq)
	s.tokens[tok] = true
	s.mu.Unlock()
	reply(w, drop, http.StatusOK, map[string]string{
		"access_token": tok, "instance_url": s.URL, "token_type": "Bearer", "scope": "api",
		"id": s.URL + "/id/00DEMU000000001AAA/005EMU000000001AAA", "issued_at": fmt.Sprint(s.o.Now().UnixMilli()),
	})
}

// checkAssertion verifies a JWT bearer assertion and returns why it is
// refused ("" when accepted): RS256 with the connected app's key, iss the
// client id, sub the user, aud one of Options.Audiences, exp in the future
// and at most 3 minutes ahead ("OAuth 2.0 JWT Bearer Flow for
// Server-to-Server Integration").
func (s *Server) checkAssertion(assertion string) string {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(assertion, claims, func(*jwt.Token) (any, error) { return s.o.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(s.o.Now), jwt.WithExpirationRequired())
	if err != nil {
		return "invalid assertion: " + err.Error()
	}
	aud, _ := claims["aud"].(string)
	exp, _ := claims.GetExpirationTime()
	switch {
	case claims["iss"] != s.o.ClientID:
		return "invalid client credentials"
	case claims["sub"] != s.o.Username:
		return "user hasn't approved this consumer"
	case !slices.Contains(s.o.Audiences, aud):
		// "OAuth 2.0 JWT Bearer Flow for Server-to-Server Integration": the
		// audience is https://login.salesforce.com, https://test.salesforce.com
		// or an Experience Cloud site URL — never the URL the assertion is
		// posted to. The refusal is the one "OAuth 2.0 Authorization Errors"
		// shows for the JWT bearer flow.
		return "Audience validation failed"
	case exp == nil || exp.Sub(s.o.Now()) > maxAssertionLifetime:
		return "expiration is too far in the future"
	}
	return ""
}

// loginAllowed counts a login of the user and reports whether it is within
// Options.LoginsPerHour over the last hour (sliding, by Options.Now).
func (s *Server) loginAllowed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	kept := s.logins[:0]
	for _, at := range s.logins {
		if now.Sub(at) < time.Hour {
			kept = append(kept, at)
		}
	}
	s.logins = append(kept, now)
	return len(s.logins) <= s.o.LoginsPerHour
}

func oauthError(w http.ResponseWriter, code, description string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": description})
}

// authorized checks the bearer token of a data request and, when it is not
// valid, answers 401 INVALID_SESSION_ID.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	valid := ok && s.tokens[tok]
	s.mu.Unlock()
	if !valid {
		apiError(w, http.StatusUnauthorized, "INVALID_SESSION_ID", "Session expired or invalid")
	}
	return valid
}

// apiError answers Salesforce's error list [{"message","errorCode","fields"}].
func apiError(w http.ResponseWriter, status int, code, message string, fields ...string) {
	if fields == nil {
		fields = []string{}
	}
	writeJSON(w, status, []map[string]any{{"message": message, "errorCode": code, "fields": fields}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
