package auth

import (
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MinRSABits is the smallest RSA modulus, in bits, accepted in
// certificate_files (NIST SP 800-131A: 2048 bits or more). Salesforce
// certificates are 2048 or 4096 bits.
const MinRSABits = 2048

// KeyInfo describes one configured RSA verification key, for the start-up
// log: where it came from, the labels a JWT `kid` header may name it by, and
// when its certificate stops being valid (zero for a bare PUBLIC KEY block).
// The proxy trusts configured keys as keys and does not enforce NotAfter (a
// JWS verifier checks signatures, not certificate chains); the start-up log
// should warn about an expired or soon-expiring certificate instead.
type KeyInfo struct {
	// Source is "file.crt#1": the file and the 1-based PEM block in it.
	Source string
	// Issuer is the one `iss` the key may sign for (config.Auth.Bindings).
	Issuer string
	// Labels are matched against `kid` (case-insensitively): the file name
	// without extension (name the file after the Salesforce certificate's
	// unique name, e.g. sf_jwt_2026.crt), the certificate's subject CN
	// (Salesforce self-signed certificates carry the certificate's label
	// there), and the lower-case hex SHA-1 and SHA-256 thumbprints of the
	// DER certificate (of the DER public key for a PUBLIC KEY block).
	Labels []string
	// Bits is the RSA modulus size in bits.
	Bits int
	// NotBefore and NotAfter are the certificate's validity period (RFC
	// 5280 §4.1.2.5); zero for a PUBLIC KEY block, which has none.
	NotBefore time.Time
	NotAfter  time.Time
}

// ValidAt reports whether the key's certificate is within its validity
// period at now: always for a bare public key.
func (k KeyInfo) ValidAt(now time.Time) bool {
	return (k.NotBefore.IsZero() || !now.Before(k.NotBefore)) && (k.NotAfter.IsZero() || !now.After(k.NotAfter))
}

// rsaKey is one configured RSA public key, the issuer it is bound to and
// what `kid` may call it.
type rsaKey struct {
	info   KeyInfo
	issuer string
	pub    *rsa.PublicKey
}

// matches reports whether kid names this key by one of its labels.
func (k rsaKey) matches(kid string) bool {
	for _, l := range k.info.Labels {
		if strings.EqualFold(l, kid) {
			return true
		}
	}
	return false
}

// loadRSAKeys reads every PEM block of every file, bound to issuer:
// CERTIFICATE, PUBLIC KEY (PKIX) or RSA PUBLIC KEY (PKCS #1). Any other
// block type, a non-RSA key, a key under MinRSABits or a file with no block
// is an error naming the configuration key (path, as config.IssuerKeys.Path)
// and the file.
func loadRSAKeys(path, issuer string, files []string) ([]rsaKey, error) {
	var keys []rsaKey
	for i, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("%s.certificate_files[%d]: %w", path, i, err)
		}
		got, err := parsePEMKeys(name, data)
		if err != nil {
			return nil, fmt.Errorf("%s.certificate_files[%d] %s: %w", path, i, name, err)
		}
		for j := range got {
			got[j].issuer, got[j].info.Issuer = issuer, issuer
		}
		keys = append(keys, got...)
	}
	return keys, nil
}

// parsePEMKeys parses every PEM block in data; name labels the keys.
func parsePEMKeys(name string, data []byte) ([]rsaKey, error) {
	stem := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	var keys []rsaKey
	rest := data
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		k, err := parseBlock(block)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		k.info.Source = fmt.Sprintf("%s#%d", name, n)
		k.info.Labels = append([]string{stem}, k.info.Labels...)
		k.info.Bits = k.pub.N.BitLen()
		if k.info.Bits < MinRSABits {
			return nil, fmt.Errorf("PEM block %d: RSA key of %d bits; at least %d required",
				n, k.info.Bits, MinRSABits)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no CERTIFICATE or PUBLIC KEY PEM block")
	}
	return keys, nil
}

// parseBlock turns one PEM block into an RSA key with its thumbprint labels.
func parseBlock(block *pem.Block) (rsaKey, error) {
	var (
		pub any
		k   rsaKey
		err error
	)
	switch block.Type {
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err != nil {
			return k, err
		}
		pub, k.info.NotBefore, k.info.NotAfter = cert.PublicKey, cert.NotBefore, cert.NotAfter
		if cert.Subject.CommonName != "" {
			k.info.Labels = append(k.info.Labels, cert.Subject.CommonName)
		}
	case "PUBLIC KEY":
		if pub, err = x509.ParsePKIXPublicKey(block.Bytes); err != nil {
			return k, err
		}
	case "RSA PUBLIC KEY":
		if pub, err = x509.ParsePKCS1PublicKey(block.Bytes); err != nil {
			return k, err
		}
	default:
		return k, fmt.Errorf("%s block; want CERTIFICATE or PUBLIC KEY (never a private key)", block.Type)
	}
	rp, ok := pub.(*rsa.PublicKey)
	if !ok {
		return k, fmt.Errorf("%T key; only RSA keys verify RS256/RS512", pub)
	}
	s1, s256 := sha1.Sum(block.Bytes), sha256.Sum256(block.Bytes)
	k.pub = rp
	k.info.Labels = append(k.info.Labels, hex.EncodeToString(s1[:]), hex.EncodeToString(s256[:]))
	return k, nil
}
