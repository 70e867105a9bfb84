//go:build fault

package fault

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestSalesforceDownDeadLettersArriveOnce: the upstream always answers
// 500, so 60 asynchronous writes (max_attempts 2) all end dead-lettered
// while the Salesforce emulator answers every request 503. Once it is back
// (faults cleared), every dead letter arrives as exactly one
// Failed_Callout__c record (contract §7: the outbox is durable and the upsert
// keys on Callout_Id__c). The replicas run the real binary, trusting the
// emulator's certificate through SSL_CERT_FILE. It logs the Salesforce API
// calls made per dead letter (BENCHMARKS.md).
func TestSalesforceDownDeadLettersArriveOnce(t *testing.T) {
	// The writer's batching at its defaults (batch_linger, flush_lease):
	// the calls per dead letter logged below are the shipped settings'.
	st := newSFSetup(t, nil, []string{"max_attempts: 2"}, "batch_linger: 2s", "flush_lease: 15s")
	emu, reps, c := st.emu, st.replicas(t, 2), st.c

	emu.Inject(sfemu.Fault{Status: http.StatusServiceUnavailable, Body: sfemu.ServerError, Times: 1 << 30})
	down := time.Now()
	acc, refused := c.postAsync(60, 8, "pay", "sf", func(i int) string { return reps[i%2].URL }, nil)
	if refused > 0 {
		t.Fatalf("%d of 60 writes were not accepted", refused)
	}
	wantAll(t, c.waitFinal(t, reps[0].URL, acc, 60*time.Second), policy.DeadLettered)
	time.Sleep(time.Until(down.Add(4 * time.Second)))
	failedWhileDown := totalCalls(emu)
	emu.ClearFaults()
	t.Logf("Salesforce down for %s; %d requests refused meanwhile", time.Since(down), failedWhileDown)

	waitMirrored(t, emu, acc, 90*time.Second)
	after := totalCalls(emu) - failedWhileDown
	t.Logf("Salesforce API calls after recovery: %d for %d dead letters (%.2f per dead letter; token %d, "+
		"composite %d, upsert %d, upsert1 %d, create %d, create1 %d, query %d, action %d)", after, len(acc),
		float64(after)/float64(len(acc)), emu.Calls("token"), emu.Calls("composite"), emu.Calls("upsert"), emu.Calls("upsert1"),
		emu.Calls("create"), emu.Calls("create1"), emu.Calls("query"), emu.Calls("action"))
}

// startEmulator starts the emulator on o with a fresh connected-app key
// (o's key, client id and user are set) and returns it and a replica
// environment that trusts its certificate (SSL_CERT_FILE), names its
// client id and the key file (KEY_FILE).
func startEmulator(t *testing.T, o sfemu.Options) (*sfemu.Server, map[string]string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o.PublicKey, o.ClientID, o.Username = &key.PublicKey, "fault-client", "proxy@fault.test"
	emu := sfemu.New(t, o)
	dir := t.TempDir()
	keyFile, certFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: emu.Certificate().Raw})
	for f, b := range map[string][]byte{keyFile: keyPEM, certFile: certPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"SF_CLIENT_ID": "fault-client", "SSL_CERT_FILE": certFile, "KEY_FILE": keyFile}
	for k, v := range replicaEnv {
		env[k] = v
	}
	return emu, env
}

// totalCalls is every request the emulator has seen: token requests and
// API calls (a Composite request is one call, whatever it carries).
func totalCalls(emu *sfemu.Server) int {
	return emu.Calls("token") + int(emu.APICalls())
}
