package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestE2ECertificateValidityWarned: a certificate of auth.certificate_files
// that has expired, or is not valid yet, is a loud warning at start naming
// its file, and callout_auth_certificates_invalid counts it;
// a valid one is neither.
func TestE2ECertificateValidityWarned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := authtest.NewRSAKey(t)
	write := func(name string, from, to time.Time) string {
		b, err := authtest.CertificatePEM(key, name, from, to)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".crt")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	y := func(year int) time.Time { return time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC) }
	expired := write("expired", y(2000), y(2001))
	future := write("future", y(2090), y(2100))
	valid := write("valid", y(2000), y(2100))
	up := proctest.NewUpstream(t, okHandler)
	cfg := strings.Replace(devConfig(proctest.Endpoint("api", up.URL, loopbackNets)),
		"  algorithms: [HS256]\n",
		"  algorithms: [HS256, RS256]\n", 1)
	cfg = strings.Replace(cfg, "hs256_secret_env: TEST_JWT_SECRET}", // bound to the first issuer
		"hs256_secret_env: TEST_JWT_SECRET, certificate_files: ["+expired+", "+future+", "+valid+"]}", 1)
	p := startProxy(t, cfg, testEnv())

	logs := p.logs.String()
	for _, want := range []string{"AUTH CERTIFICATE EXPIRED", expired + "#1", "AUTH CERTIFICATE NOT YET VALID", future + "#1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("start-up logs do not contain %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, valid+"#1") {
		t.Errorf("the valid certificate was warned about:\n%s", logs)
	}
	_, metrics := get(t, p.AdminURL+"/metrics")
	if !strings.Contains(string(metrics), "\ncallout_auth_certificates_invalid 2\n") {
		t.Errorf("/metrics has no callout_auth_certificates_invalid 2:\n%s", metrics)
	}
	if got := metricValue(t, p, "callout_auth_certificate_not_after_timestamp_seconds", `source="`+expired+`#1"`); got != float64(y(2001).Unix()) {
		t.Errorf("not_after of the expired certificate = %v, want %d", got, y(2001).Unix())
	}
}
