package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
)

// TestConnectionShare: on a callout listener of 2 connections with a share
// of 1 (limits.max_connections_per_issuer), clockRigIssuer's organisation
// holds both with writes whose bodies never come. The other
// organisation's write on a new connection cuts org-a's oldest: that one is
// answered 503 overloaded naming the share, Retry-After 1, Connection:
// close, nothing forwarded; the other organisation's write is forwarded and
// answered 200, and org-a's second request is not cut (contract §10).
func TestConnectionShare(t *testing.T) {
	rig := &clockRig{}
	rig.build(t, rigSpec{
		upstream: func(w http.ResponseWriter, r *http.Request) { rig.hits.Add(1) },
		issuers:  []string{shareRigIssuer},
		extra:    "limits:\n  max_connections: 2\n  max_connections_per_issuer: 1\n",
	})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limit.NewListener(raw, 2)
	l.SetShare(rig.srv.d.Config.Limits.MaxConnectionsPerIssuer)
	hs := &http.Server{Handler: l.Handler(rig.srv.Handler()), ConnState: l.ConnState, ConnContext: l.ConnContext,
		ReadHeaderTimeout: time.Minute}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	mint := func(iss string) string {
		tok, err := auth.MintHS256([]byte(clockRigSecret), iss, "callout-proxy", "005000000000001AAA",
			10*time.Minute, rig.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	var stalled []net.Conn
	for i, key := range []string{"a-1", "a-2"} {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "PUT /callout/api/v1/a HTTP/1.1\r\nHost: x\r\nAuthorization: "+mint(clockRigIssuer)+
			"\r\nIdempotency-Key: "+key+"\r\nContent-Length: 100\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for l.Running(clockRigIssuer) < i+1 { // its token verified, its body awaited
			time.Sleep(time.Millisecond)
		}
		stalled = append(stalled, c)
	}

	req, _ := http.NewRequest(http.MethodPut, "http://"+raw.Addr().String()+"/callout/api/v1/b", strings.NewReader(`{"n":1}`))
	req.Header.Set("Authorization", mint(shareRigIssuer))
	req.Header.Set("Idempotency-Key", "b-1")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the other organisation's write at the cap: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the other organisation's write at the cap: %d, want 200", resp.StatusCode)
	}

	_ = stalled[0].SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on a broken test, not a timing
	cut, err := http.ReadResponse(bufio.NewReader(stalled[0]), nil)
	if err != nil {
		t.Fatalf("org-a's oldest request: no answer: %v", err)
	}
	var doc struct{ Type, Detail string }
	_ = json.NewDecoder(cut.Body).Decode(&doc)
	cut.Body.Close()
	switch {
	case cut.StatusCode != http.StatusServiceUnavailable || cut.Header.Get("Retry-After") != "1" || !cut.Close:
		t.Errorf("cut request: %d, Retry-After %q, close %v; want 503, 1, true", cut.StatusCode, cut.Header.Get("Retry-After"), cut.Close)
	case doc.Type != "urn:callout-proxy:problem:overloaded" || cut.Header.Get("Callout-Outcome") != "rejected" ||
		!strings.Contains(doc.Detail, "limits.max_connections_per_issuer: 1"):
		t.Errorf("cut request: %s %q outcome %q, want overloaded naming the share, rejected", doc.Type, doc.Detail,
			cut.Header.Get("Callout-Outcome"))
	}
	if l.Cut() != 1 || l.Running(clockRigIssuer) != 1 {
		t.Errorf("cut %d, org-a running %d; want 1 and 1 (its second request kept)", l.Cut(), l.Running(clockRigIssuer))
	}
	if n := rig.hits.Load(); n != 1 {
		t.Errorf("upstream hits %d, want 1 (only the other organisation's write)", n)
	}
}
