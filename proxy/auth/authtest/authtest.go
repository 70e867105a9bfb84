// Package authtest helps tests authenticate to the proxy the way Salesforce
// does (contract §9): RSA keys, self-signed certificates written as PEM files
// for auth.certificate_files, and RS256/RS512/HS256 tokens with the claims
// of a Named Credential JWT. It is for tests only; every helper fails the
// test on error.
package authtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// KeyBits is the RSA modulus size NewRSAKey generates, in bits: the
// smallest the proxy accepts (auth.MinRSABits) and what Salesforce uses.
const KeyBits = 2048

// NewRSAKey generates a KeyBits RSA private key.
func NewRSAKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		t.Fatalf("authtest: generate RSA key: %v", err)
	}
	return key
}

// CertificatePEM returns a self-signed X.509 certificate for key as one PEM
// CERTIFICATE block, with subject CN commonName and the given validity
// period.
func CertificatePEM(key *rsa.PrivateKey, commonName string, notBefore, notAfter time.Time) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("authtest: serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"Callout Proxy tests"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("authtest: create certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// WriteCertificate writes a self-signed certificate for key (CN
// "callout-proxy-test") to a new file cert-*.crt in dir and returns its path.
func WriteCertificate(t testing.TB, dir string, key *rsa.PrivateKey) string {
	t.Helper()
	name := newFile(t, dir, "cert-*.crt")
	writePEM(t, name, certificate(t, key, "callout-proxy-test"))
	return name
}

// newFile creates a new empty file in dir named by pattern (os.CreateTemp)
// and returns its path.
func newFile(t testing.TB, dir, pattern string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		t.Fatalf("authtest: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("authtest: %v", err)
	}
	return f.Name()
}

// WriteNamedCertificate writes a self-signed certificate for key with CN
// name to dir/name.crt and returns its path, so a token whose `kid` is name
// matches it by CN and by file name (auth.KeyInfo.Labels).
func WriteNamedCertificate(t testing.TB, dir, name string, key *rsa.PrivateKey) string {
	t.Helper()
	path := filepath.Join(dir, name+".crt")
	writePEM(t, path, certificate(t, key, name))
	return path
}

// WritePublicKey writes key's public half as a PKIX PUBLIC KEY PEM block to
// a new file key-*.pem in dir and returns its path.
func WritePublicKey(t testing.TB, dir string, key *rsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatalf("authtest: marshal public key: %v", err)
	}
	name := newFile(t, dir, "key-*.pem")
	writePEM(t, name, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return name
}

// certificate is CertificatePEM valid from 2000 to 2100: the proxy ignores
// a certificate's validity period, so a fixed, wide one keeps tests
// independent of the wall clock.
func certificate(t testing.TB, key *rsa.PrivateKey, commonName string) []byte {
	t.Helper()
	notBefore := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	b, err := CertificatePEM(key, commonName, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writePEM writes b to path, readable by the owner only.
func writePEM(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("authtest: %v", err)
	}
}

// Claims returns the registered claims of a Salesforce Named Credential
// JWT: iss, aud, sub, iat = nbf = issuedAt, exp = issuedAt + lifetime
// (auth.NamedCredentialClaims, which MintHS256 signs).
func Claims(issuer, audience, subject string, issuedAt time.Time, lifetime time.Duration) jwt.RegisteredClaims {
	return auth.NamedCredentialClaims(issuer, audience, subject, issuedAt, lifetime)
}

// MintRS signs claims with key; alg is "RS256" or "RS512".
func MintRS(t testing.TB, key *rsa.PrivateKey, alg string, claims jwt.Claims) string {
	t.Helper()
	return MintRSWithKID(t, key, alg, "", claims)
}

// MintRSWithKID is MintRS with a `kid` header (none when kid is empty).
func MintRSWithKID(t testing.TB, key *rsa.PrivateKey, alg, kid string, claims jwt.Claims) string {
	t.Helper()
	method, ok := jwt.GetSigningMethod(alg).(*jwt.SigningMethodRSA)
	if !ok {
		t.Fatalf("authtest: %q is not an RSA PKCS#1 v1.5 algorithm", alg)
	}
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("authtest: sign %s: %v", alg, err)
	}
	return s
}

// MintHS256 signs claims with HS256 and secret (any length: tests may need
// a bad one).
func MintHS256(t testing.TB, secret []byte, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		t.Fatalf("authtest: sign HS256: %v", err)
	}
	return s
}
