// Package credtest has test doubles for upstream credentials: an OAuth 2.0
// token endpoint (client credentials grant, RFC 6749 §4.4) over TLS, an
// upstream that accepts only its tokens, a mutual-TLS upstream, and the
// certificates and files they need. It is for tests only; nothing in the
// proxy imports it.
package credtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TokenRequest is one request the TokenServer received.
type TokenRequest struct {
	// ClientID and Secret are the client credentials it carried.
	ClientID, Secret string
	// Style is "header" (HTTP Basic, RFC 6749 §2.3.1) or "params" (form).
	Style string
	// Form is the request's form, client_secret removed.
	Form url.Values
	// Token is the access token minted; "" when refused.
	Token string
}

// TokenServer is an OAuth 2.0 token endpoint on 127.0.0.1 over TLS. It
// accepts the client credentials grant for one client id and the secrets
// it is told, mints tokens "tok-<n>-<random>" and remembers which secret
// minted each, so an upstream can accept only tokens minted with a secret
// still accepted (a rotation revokes the old ones).
type TokenServer struct {
	// URL is the token endpoint: https://127.0.0.1:<port>/token.
	URL string
	// CAFile is a PEM file of the server's certificate, for oauth2.ca_file.
	CAFile string

	srv      *httptest.Server
	clientID string

	mu       sync.Mutex
	secrets  []string
	lifetime int               // expires_in seconds; 0 leaves it out
	fail     int               // status to answer instead of a token; 0: none
	failBody string            // body of a fail answer
	hold     chan struct{}     // non-nil: requests wait until it is closed
	arrived  chan struct{}     // closed when a held request arrives
	minted   map[string]string // token -> secret that minted it
	revoked  map[string]bool   // tokens no longer Valid
	reqs     []TokenRequest
}

// NewTokenServer starts a token endpoint for clientID accepting secrets,
// issuing tokens that expire in 3600 s. It is closed when the test ends.
func NewTokenServer(t testing.TB, clientID string, secrets ...string) *TokenServer {
	t.Helper()
	s := &TokenServer{clientID: clientID, secrets: secrets, lifetime: 3600, minted: map[string]string{}, revoked: map[string]bool{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL + "/token"
	s.CAFile = WriteFile(t, t.TempDir(), "token-ca.pem", CertPEM(s.srv.Certificate()))
	return s
}

// Close stops the server: later token requests find nothing listening.
func (s *TokenServer) Close() { s.srv.Close() }

// SetSecrets replaces the accepted client secrets; tokens minted with any
// other secret stop being Valid.
func (s *TokenServer) SetSecrets(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = secrets
}

// SetLifetime sets the expires_in of later tokens, in seconds; 0 leaves
// expires_in out.
func (s *TokenServer) SetLifetime(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifetime = seconds
}

// Fail makes later requests answer status with body (JSON), whatever they
// carry; status 0 goes back to minting tokens.
func (s *TokenServer) Fail(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.failBody = status, body
}

// Hold makes later requests wait until release is called; arrived is
// closed when the first of them arrives.
func (s *TokenServer) Hold() (arrived <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold, arr := make(chan struct{}), make(chan struct{})
	s.hold, s.arrived = hold, arr
	var once sync.Once
	return arr, func() {
		once.Do(func() {
			s.mu.Lock()
			s.hold = nil
			s.mu.Unlock()
			close(hold)
		})
	}
}

// Revoke makes every token minted so far invalid (as a token server does
// when an operator revokes them): Valid refuses them from now on.
func (s *TokenServer) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok := range s.minted {
		s.revoked[tok] = true
	}
}

// Requests returns every request received so far, in order.
func (s *TokenServer) Requests() []TokenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Valid reports whether authorization is "Bearer <token>" for a token
// this server minted, did not revoke, with a secret it still accepts.
func (s *TokenServer) Valid(authorization string) bool {
	tok, ok := strings.CutPrefix(authorization, "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, minted := s.minted[tok]
	return ok && minted && !s.revoked[tok] && slices.Contains(s.secrets, sec)
}

// SecretOf returns the client secret that minted token ("" if none did).
func (s *TokenServer) SecretOf(token string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.minted[token]
}

// Protect wraps h so that a request without a Valid Authorization gets
// 401 with `WWW-Authenticate: Bearer error="invalid_token"` (RFC 6750 §3).
func (s *TokenServer) Protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.Valid(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *TokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	s.wait(r)
	req := TokenRequest{Style: "params", Form: r.PostForm}
	if id, sec, ok := r.BasicAuth(); ok { // RFC 6749 §2.3.1: form-encoded, then Basic
		req.Style = "header"
		req.ClientID, _ = url.QueryUnescape(id)
		req.Secret, _ = url.QueryUnescape(sec)
	} else {
		req.ClientID, req.Secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	req.Form = url.Values(r.PostForm)
	req.Form.Del("client_secret")
	s.mu.Lock()
	defer s.mu.Unlock()
	status, body := s.answer(&req, r.PostForm.Get("grant_type"))
	s.reqs = append(s.reqs, req)
	if body == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(s.failBody))
		return
	}
	writeJSON(w, status, body)
}

// answer decides a request's answer under s.mu; a nil body means the
// configured failure.
func (s *TokenServer) answer(req *TokenRequest, grant string) (int, map[string]any) {
	switch {
	case s.fail != 0:
		return s.fail, nil
	case grant != "client_credentials":
		return http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"}
	case req.ClientID != s.clientID || !slices.Contains(s.secrets, req.Secret):
		return http.StatusUnauthorized, map[string]any{"error": "invalid_client"}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	req.Token = "tok-" + strconv.Itoa(len(s.minted)+1) + "-" + hex.EncodeToString(b)
	s.minted[req.Token] = req.Secret
	body := map[string]any{"access_token": req.Token, "token_type": "bearer"}
	if s.lifetime > 0 {
		body["expires_in"] = s.lifetime
	}
	return http.StatusOK, body
}

// wait blocks a request while the server holds requests.
func (s *TokenServer) wait(r *http.Request) {
	s.mu.Lock()
	hold, arrived := s.hold, s.arrived
	if arrived != nil {
		s.arrived = nil
		close(arrived)
	}
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
