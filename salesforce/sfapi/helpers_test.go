package sfapi

import (
	"bytes"
	"context"
	"crypto/rsa"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// t0 is a round Unix-ms instant.
var t0 = time.UnixMilli(1_700_000_000_000).UTC()

const (
	// object and extField are the dead-letter object and its external id
	// (the salesforce package's object, extField).
	object   = "Failed_Callout__c"
	extField = "Callout_Id__c"
)

// env is a Client against an emulator on a test clock.
type env struct {
	t      testing.TB
	key    *rsa.PrivateKey
	clk    *clocktest.Clock
	emu    *sfemu.Server
	client *Client
	// logs is the client's log; it logs only under its token lock, so
	// reading it once the calls returned needs no lock of its own.
	logs *bytes.Buffer
	// authFailed counts the calls whose OnResult was auth_failed.
	authFailed atomic.Int64
}

// newEnv starts an emulator that knows the dead-letter object (the fields
// these tests write) and a client of it.
func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the emulator's options changed by emu (nil:
// none).
func newEnvWith(t testing.TB, emu func(*sfemu.Options)) *env {
	t.Helper()
	e := &env{t: t, key: authtest.NewRSAKey(t), clk: clocktest.New(t0), logs: &bytes.Buffer{}}
	eo := sfemu.Options{PublicKey: &e.key.PublicKey, ClientID: sfemu.ClientID, Username: sfemu.Username, Now: e.clk.Now,
		Objects: map[string]map[string]int{object: {extField: 255, "Request_Body__c": 0, "Status__c": 0}}}
	if emu != nil {
		emu(&eo)
	}
	e.emu = sfemu.New(t, eo)
	var err error
	e.client, err = NewClient(Options{
		Credentials: Credentials{LoginURL: e.emu.URL, ClientID: sfemu.ClientID, Username: sfemu.Username, Key: e.key},
		Transport:   e.emu.Client().Transport, Now: e.clk.Now,
		OnResult: func(r string) {
			if r == string(AuthFailed) {
				e.authFailed.Add(1)
			}
		},
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mintConcurrently makes n concurrent calls that each need a token and
// returns how many token requests reached the emulator meanwhile.
func (e *env) mintConcurrently(n int) int {
	e.t.Helper()
	before := e.emu.Calls("token")
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { _, _ = e.client.tokens.get(ctxT(e.t)) })
	}
	wg.Wait()
	return e.emu.Calls("token") - before
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
