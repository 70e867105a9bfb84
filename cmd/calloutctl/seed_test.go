package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// seeded is a dead letter a test made.
type seeded struct {
	id, endpoint, key string
	at                time.Time // dead-lettered at, on the proxy's clock
}

// submit sends one asynchronous write (Prefer: respond-async) with an
// Idempotency-Key through the callout listener, as Apex would, and
// returns its callout id.
func (p *proxyEnv) submit(t *testing.T, endpoint, key string) string {
	t.Helper()
	tok, err := auth.MintHS256([]byte(jwtSecret), testIssuer, "callout-proxy", "005000000000001AAA",
		10*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", p.callee+"/callout/"+endpoint+"/v1/charges",
		strings.NewReader(`{"key":"`+key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	req.Header.Set("Prefer", "respond-async")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Callout-Id") == "" {
		t.Fatalf("submit %s: %d %s", key, resp.StatusCode, body)
	}
	return resp.Header.Get("Callout-Id")
}

// seedDeadLetters makes n dead letters of endpoint through the callout
// listener (the upstream refuses them with a 400), step apart on the
// proxy's clock; keys are prefix-0 … prefix-(n-1).
func (p *proxyEnv) seedDeadLetters(t *testing.T, endpoint, prefix string, n int, step time.Duration) []seeded {
	t.Helper()
	out := make([]seeded, n)
	for i := range out {
		key := fmt.Sprintf("%s-%d", prefix, i)
		id := p.submit(t, endpoint, key)
		eventually(t, key+" dead-lettered", func() bool {
			c, err := p.store.Get(t.Context(), id)
			return err == nil && c.State == policy.DeadLettered
		})
		out[i] = seeded{id: id, endpoint: endpoint, key: key, at: p.clk.Now()}
		p.clk.Advance(step)
	}
	return out
}

// seedMany makes n dead letters of endpoint straight through the store
// (as n accepted respond-async callouts), all at the clock's time; the
// dispatcher sends each to the refusing upstream.
func (p *proxyEnv) seedMany(t *testing.T, endpoint, prefix string, n int) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		_, err := p.store.Enqueue(t.Context(), policy.NewCallout{Endpoint: endpoint, Issuer: testIssuer,
			Method: "POST", Path: "/v1/charges", Body: []byte(`{"key":"` + key + `"}`), IdempotencyKey: key,
			Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {`"` + key + `"`}}},
			policy.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, fmt.Sprintf("%d dead letters", n), func() bool {
		st, err := p.store.EndpointState(t.Context(), endpoint)
		return err == nil && st.DeadLetters == int64(n) && st.Due+st.Leased == 0
	})
}

// idle waits until endpoint has nothing pending (every replay sent).
func (p *proxyEnv) idle(t *testing.T, endpoint string) {
	t.Helper()
	eventually(t, endpoint+" idle", func() bool {
		st, err := p.store.EndpointState(t.Context(), endpoint)
		return err == nil && st.Due+st.Leased == 0
	})
}
