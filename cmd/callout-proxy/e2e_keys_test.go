package main

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// randomUUID is a version 4 UUID in the shape of Apex's (and Java's)
// UUID.randomUUID().toString(): lower-case hex, 8-4-4-4-12.
func randomUUID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// TestE2EBareIdempotencyKeys: a write with the key Apex code writes
// (`req.setHeader('Idempotency-Key', UUID.randomUUID().toString())`) is
// accepted whatever its first character (contract §5); the same key sent quoted
// is the same key, so it replays; a key of 256 characters and two fields
// are refused before the upstream is called.
func TestE2EBareIdempotencyKeys(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("api", up.URL, loopbackNets)), testEnv())

	keys := []string{"0" + randomUUID(t)[1:], strings.ToUpper("9" + randomUUID(t)[1:]), "a" + randomUUID(t)[1:]}
	for i, key := range keys {
		path := fmt.Sprintf("/callout/api/charges/%d", i)
		resp, body := p.call(t, http.MethodPost, path, strings.NewReader(`{"n":1}`),
			http.Header{"Idempotency-Key": {key}})
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if got := up.Request(t, fmt.Sprintf("/charges/%d", i)).Header.Get("Idempotency-Key"); got != key {
			t.Errorf("upstream got Idempotency-Key %q, want %q unchanged", got, key)
		}
		resp, body = p.call(t, http.MethodPost, path, strings.NewReader(`{"n":1}`),
			http.Header{"Idempotency-Key": {`"` + key + `"`}})
		wantUpstream(t, resp, body, http.StatusOK, policy.Success)
		if resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("key %s sent quoted was not a replay of the bare one", key)
		}
		if n := up.HitsFor(fmt.Sprintf("/charges/%d", i)); n != 1 {
			t.Errorf("upstream called %d times for one key, want 1", n)
		}
	}
	for _, tt := range []struct {
		name   string
		values []string
	}{
		{"256 characters", []string{strings.Repeat("7", 256)}},
		{"two fields", []string{randomUUID(t), randomUUID(t)}},
		{"a list", []string{randomUUID(t) + ", " + randomUUID(t)}},
	} {
		resp, body := p.call(t, http.MethodPost, "/callout/api/refused", strings.NewReader(`{}`),
			http.Header{"Idempotency-Key": tt.values})
		wantProblem(t, resp, body, http.StatusBadRequest, problem.IdempotencyKeyInvalid, policy.Rejected)
	}
	if n := up.HitsFor("/refused"); n != 0 {
		t.Errorf("refused keys reached the upstream %d times", n)
	}
}
