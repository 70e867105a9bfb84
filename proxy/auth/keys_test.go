package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

func TestNewVerifierErrors(t *testing.T) {
	f := newFixture(t)
	files := badFiles(t, f)
	tests := []struct {
		name   string
		mutate func(*config.Auth)
		want   string
	}{
		{"no issuers", func(c *config.Auth) { c.Issuers = nil }, "auth.issuers: at least one issuer"},
		{"empty issuer", func(c *config.Auth) { c.Issuers = []string{issuer, ""} }, "auth.issuers[1]: empty issuer"},
		{"no audience", func(c *config.Auth) { c.Audience = "" }, "auth.audience: required"},
		{"no algorithms", func(c *config.Auth) { c.Algorithms = nil }, "auth.algorithms: at least one"},
		{"alg none", func(c *config.Auth) { c.Algorithms = []string{"none"} }, `auth.algorithms[0]: "none" is not one of`},
		{"alg RS384", func(c *config.Auth) { c.Algorithms = []string{auth.RS256, "RS384"} }, `auth.algorithms[1]: "RS384"`},
		{"RS256 without certificates", func(c *config.Auth) { c.CertificateFiles = nil }, "auth.certificate_files: required for RS256/RS512"},
		{"certificates without RS", func(c *config.Auth) { c.Algorithms = []string{auth.HS256} }, "auth.algorithms has no RS256/RS512"},
		{"HS256 without secret", func(c *config.Auth) { c.Algorithms = []string{auth.RS256, auth.HS256}; c.HS256SecretEnv = "" }, "required for HS256"},
		{"secret without HS256", func(c *config.Auth) { c.Algorithms = []string{auth.RS256} }, "auth.algorithms has no HS256"},
		{"secret env unset", func(c *config.Auth) {
			c.Algorithms = []string{auth.HS256}
			c.CertificateFiles = nil
			c.HS256SecretEnv = "UNSET_VAR"
		}, "UNSET_VAR"},
		{"secret env and file", func(c *config.Auth) {
			c.Algorithms = []string{auth.HS256}
			c.CertificateFiles = nil
			c.HS256SecretFile = files["short"]
		}, "not both"},
		{"short secret", func(c *config.Auth) {
			c.Algorithms, c.CertificateFiles, c.HS256SecretEnv, c.HS256SecretFile = []string{auth.HS256}, nil, "", files["short"]
		}, "HS256 secret is 9 bytes; at least 32 required"},
		{"PEM as secret", func(c *config.Auth) {
			c.Algorithms, c.CertificateFiles, c.HS256SecretEnv, c.HS256SecretFile = []string{auth.HS256}, nil, "", files["pemsec"]
		}, "HS256 secret is a PEM block"},
		{"negative leeway", func(c *config.Auth) { c.Leeway = -time.Second }, "auth.leeway: -1s is negative"},
		{"negative lifetime", func(c *config.Auth) { c.MaxTokenLifetime = -time.Minute }, "auth.max_token_lifetime: -1m0s is negative"},
		{"missing file", func(c *config.Auth) { c.CertificateFiles = []string{f.certFile, f.dir + "/nope.crt"} }, "auth.certificate_files[1]"},
		{"no PEM block", func(c *config.Auth) { c.CertificateFiles = []string{files["empty"]} }, "no CERTIFICATE or PUBLIC KEY PEM block"},
		{"private key block", func(c *config.Auth) { c.CertificateFiles = []string{files["private"]} }, "RSA PRIVATE KEY block; want CERTIFICATE or PUBLIC KEY"},
		{"EC key", func(c *config.Auth) { c.CertificateFiles = []string{files["ec"]} }, "only RSA keys"},
		{"1024-bit key", func(c *config.Auth) { c.CertificateFiles = []string{files["weak"]} }, "RSA key of 1024 bits; at least 2048 required"},
		{"bad certificate", func(c *config.Auth) { c.CertificateFiles = []string{files["garbage"]} }, "PEM block 1"},
		{"several issuers, top-level keys", func(c *config.Auth) { c.Issuers = []string{issuer, sandbox} },
			"auth.certificate_files/hs256_secret_env: not bound to an issuer"},
		{"issuer_keys of an unknown issuer", func(c *config.Auth) {
			c.IssuerKeys = []config.IssuerKeys{{Issuer: sandbox, HS256SecretEnv: secretEnv}}
		}, `auth.issuer_keys[0].issuer: "` + sandbox + `" is not one of auth.issuers`},
		{"issuer_keys file missing", func(c *config.Auth) {
			c.Issuers = []string{issuer, sandbox}
			c.CertificateFiles, c.HS256SecretEnv = nil, ""
			c.IssuerKeys = []config.IssuerKeys{{Issuer: issuer, CertificateFiles: []string{f.certFile}, HS256SecretEnv: secretEnv},
				{Issuer: sandbox, CertificateFiles: []string{f.dir + "/nope.crt"}}}
		}, "auth.issuer_keys[1].certificate_files[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := f.singleConfig(auth.RS256, auth.HS256)
			tt.mutate(&cfg)
			v, err := auth.NewVerifier(cfg, env, f.clock)
			if err == nil {
				t.Fatalf("NewVerifier = %v, nil; want error containing %q", v, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("error %q leaks secret material", err)
			}
		})
	}
}

// badFiles writes unusable key and secret files, by kind.
func badFiles(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weakPEM, err := authtest.CertificatePEM(weak, "weak", time.Unix(0, 0), time.Unix(1<<32, 0))
	if err != nil {
		t.Fatal(err)
	}
	privDER := x509.MarshalPKCS1PrivateKey(f.key1)
	return map[string]string{
		"ec":      writeFile(t, f.dir, "ec.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})),
		"weak":    writeFile(t, f.dir, "weak.crt", weakPEM),
		"private": writeFile(t, f.dir, "private.pem", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: privDER})),
		"empty":   writeFile(t, f.dir, "empty.crt", []byte("not a PEM file\n")),
		"garbage": writeFile(t, f.dir, "garbage.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})),
		"pemsec":  writeFile(t, f.dir, "pem-secret", append(readFile(t, f.certFile), '\n')),
		"short":   writeFile(t, f.dir, "short-secret", []byte("too-short\n")),
	}
}

func TestVerifierKeys(t *testing.T) {
	f := newFixture(t)
	// One file, three blocks: a certificate, a public key, a certificate.
	bundle := slices.Concat(readFile(t, f.certFile), readFile(t, f.pubKeyFile), readFile(t, f.rotatedFile))
	bundleFile := writeFile(t, f.dir, "bundle.pem", bundle)
	cfg := f.singleConfig(auth.RS256)
	cfg.CertificateFiles = []string{bundleFile}
	v := f.verifier(t, cfg)

	keys := v.Keys()
	if len(keys) != 3 {
		t.Fatalf("Keys() = %d keys, want 3", len(keys))
	}
	block, _ := pem.Decode(readFile(t, f.certFile))
	sum := sha1.Sum(block.Bytes)
	tests := []struct {
		name       string
		info       auth.KeyInfo
		source     string
		labels     []string
		hasExpires bool
	}{
		{"certificate", keys[0], bundleFile + "#1", []string{"bundle", currentKID, hex.EncodeToString(sum[:])}, true},
		{"public key", keys[1], bundleFile + "#2", []string{"bundle"}, false},
		{"rotated certificate", keys[2], bundleFile + "#3", []string{"bundle", "callout-proxy-test"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.info.Source != tt.source {
				t.Errorf("Source = %q, want %q", tt.info.Source, tt.source)
			}
			for _, l := range tt.labels {
				if !slices.Contains(tt.info.Labels, l) {
					t.Errorf("Labels = %q, want %q among them", tt.info.Labels, l)
				}
			}
			if tt.info.Bits != authtest.KeyBits {
				t.Errorf("Bits = %d, want %d", tt.info.Bits, authtest.KeyBits)
			}
			if got := !tt.info.NotAfter.IsZero(); got != tt.hasExpires {
				t.Errorf("NotAfter = %v, want set: %v", tt.info.NotAfter, tt.hasExpires)
			}
		})
	}
	t.Run("every block verifies", func(t *testing.T) {
		for i, key := range []*rsa.PrivateKey{f.key1, f.key3, f.key2} {
			c := f.claims(0, time.Minute)
			if _, err := v.Verify("Bearer " + authtest.MintRS(t, key, "RS256", c)); err != nil {
				t.Errorf("key of block %d: %v", i+1, err)
			}
		}
	})
	t.Run("Keys returns a copy", func(t *testing.T) {
		v.Keys()[0].Labels[0] = "changed"
		if v.Keys()[0].Labels[0] != "bundle" {
			t.Error("changing Keys() changed the verifier")
		}
	})
}

func TestHS256SecretFile(t *testing.T) {
	f := newHSFixture(t)
	for _, ending := range []string{"", "\n", "\r\n"} {
		t.Run(strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace("ending "+ending), func(t *testing.T) {
			name := writeFile(t, t.TempDir(), "secret", []byte(secret+ending))
			cfg := config.Auth{Issuers: []string{issuer}, Audience: audience,
				Algorithms: []string{auth.HS256}, HS256SecretFile: name}
			v := f.verifier(t, cfg)
			tok := authtest.MintHS256(t, []byte(secret), f.claims(0, time.Minute))
			if _, err := v.Verify("Bearer " + tok); err != nil {
				t.Fatalf("Verify with the file's secret: %v", err)
			}
			if ending == "" {
				return
			}
			withEnding := authtest.MintHS256(t, []byte(secret+ending), f.claims(0, time.Minute))
			if _, err := v.Verify("Bearer " + withEnding); err == nil {
				t.Fatal("Verify accepted a token signed with the untrimmed file content")
			}
		})
	}
}
