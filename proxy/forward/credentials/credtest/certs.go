package credtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throwaway certificate authority that issues client certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

// NewCA returns a new P-256 CA named cn, valid 2025–2035.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	cert := sign(t, tmpl, tmpl, key, key)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, pool: pool}
}

// Issue returns a client certificate (PEM) for cn signed by the CA, and its
// PKCS #8 key (PEM).
func (ca *CA) Issue(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: ca.cert.NotBefore, NotAfter: ca.cert.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return signPEM(t, tmpl, ca.cert, key, ca.key)
}

// IssueFiles issues a client certificate for cn as Issue does and writes
// it and its key to dir/cn.crt and dir/cn.key (mode 0600), as an
// endpoint's tls.client_cert_file and tls.client_key_file read them; it
// returns the two paths.
func (ca *CA) IssueFiles(t testing.TB, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, cn)
	return WriteFile(t, dir, cn+".crt", certPEM), WriteFile(t, dir, cn+".key", keyPEM)
}

// SelfSigned returns a self-signed P-256 certificate (PEM) for cn and
// dnsNames, valid 2025–2035, and its PKCS #8 key (PEM).
func SelfSigned(t testing.TB, cn string, dnsNames ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames,
		NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	return signPEM(t, tmpl, tmpl, key, key)
}

// sign signs tmpl (for key's public half) by parent and its signer and
// returns the certificate.
func sign(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// signPEM signs tmpl as sign does and returns the certificate and key as
// PEM (the key PKCS #8).
func signPEM(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (certPEM, keyPEM []byte) {
	t.Helper()
	cert := sign(t, tmpl, parent, key, signer)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// CertPEM encodes a certificate as PEM.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// WriteFile writes data to dir/name (mode 0600) and returns the path. Used
// again on the same path, it rotates the file in place.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// PeerHeader is the response header in which an MTLSServer names the
// client certificate's common name.
const PeerHeader = "X-Client-Cn"

// MTLSServer starts an https upstream on 127.0.0.1 that requires a client
// certificate issued by ca (tls.RequireAndVerifyClientCert) and answers
// 200 with the certificate's common name in PeerHeader. CAFile is its own
// certificate as PEM, for tls.ca_file. Both close when the test ends.
func MTLSServer(t testing.TB, ca *CA) (srv *httptest.Server, caFile string) {
	t.Helper()
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			w.Header().Set(PeerHeader, r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		_, _ = w.Write([]byte("mtls ok"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what tests want
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, WriteFile(t, t.TempDir(), "upstream-ca.pem", CertPEM(srv.Certificate()))
}
