package sfemu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxAssertionLifetime is Salesforce's limit on a JWT bearer assertion's
// exp, with one second of leeway for the test's clock arithmetic.
const maxAssertionLifetime = 3*time.Minute + time.Second

// token is POST /services/oauth2/token: the JWT bearer flow (RFC 7523).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	handled, drop := s.fault(w, "token")
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
// client id, sub the user, aud this server, exp in the future and at most
// 3 minutes ahead.
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
	case aud != strings.TrimRight(s.URL, "/"):
		return "audience is invalid"
	case exp == nil || exp.Sub(s.o.Now()) > maxAssertionLifetime:
		return "expiration is too far in the future"
	}
	return ""
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
