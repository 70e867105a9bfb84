package forward

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestStaticHeaderFileRotation: an injected header whose value is a file
// follows the file without a restart: a change is used once the re-check
// interval passed; an empty or broken file keeps the previous value and
// logs one error per change, never the value.
func TestStaticHeaderFileRotation(t *testing.T) {
	srv, rc := newBackend(t, nil)
	dir := t.TempDir()
	file := credtest.WriteFile(t, dir, "api-key", []byte("key-v1\n"))
	clock, logs := newFakeClock(), &proctest.LogBuffer{}
	f := newForwarder(t, Options{Now: clock.Now, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ep := newEndpoint(t, "static-rotate", srv.URL)
	ep.Headers = map[string]config.SecretRef{"X-Api-Key": {File: file}}
	steps := []struct {
		name     string
		content  string // written before the attempt unless "-"
		advance  time.Duration
		want     string
		wantErrs int
	}{
		{"first", "-", 0, "key-v1", 0},
		{"changed, same instant", "key-v2\n", 0, "key-v1", 0},
		{"after the interval", "-", time.Second, "key-v2", 0},
		{"emptied during an update", "", time.Second, "key-v2", 1},
		{"still empty", "-", time.Second, "key-v2", 1},
		{"a stray line inside", "key-v3\nkey-v4\n", time.Second, "key-v2", 2},
		{"fixed", "key-v5\r\n", time.Second, "key-v5", 2},
	}
	for _, st := range steps {
		if st.content != "-" {
			credtest.WriteFile(t, dir, "api-key", []byte(st.content))
		}
		clock.Advance(st.advance)
		if a := do(f, ep, get("/")); a.Err != nil {
			t.Fatalf("%s: %v", st.name, a.Err)
		}
		all := rc.all()
		if got := all[len(all)-1].Header.Get("X-Api-Key"); got != st.want {
			t.Fatalf("%s: upstream got %q, want %q", st.name, got, st.want)
		}
		if n := logs.Count(`"msg":"credential file unusable; keeping the previous value"`); n != st.wantErrs {
			t.Fatalf("%s: %d error lines, want %d:\n%s", st.name, n, st.wantErrs, logs)
		}
	}
	assertNoCredentials(t, nil, map[string]string{"logs": logs.String()}, "key-v")
}

// TestClientSecretRotation: the client secret file is rotated and the token
// server accepts only the new secret from then on (revoking the tokens the
// old one minted): the next attempt after the re-check interval is refused
// with the cached token, fetches a token with the new secret and succeeds —
// no restart.
func TestClientSecretRotation(t *testing.T) {
	r := newOAuthRig(t, "oauth-rotate", nil)
	if a := do(r.f, r.ep, get("/")); a.Err != nil || a.Response.Status != http.StatusOK {
		t.Fatalf("before rotation: %+v, %v", a.Response, a.Err)
	}
	credtest.WriteFile(t, filepath.Dir(r.secretFile), "client-secret", []byte(secretTwo+"\n"))
	r.ts.SetSecrets(secretTwo)
	r.clock.Advance(time.Second)
	a := do(r.f, r.ep, get("/"))
	if a.Err != nil || a.Response.Status != http.StatusOK {
		t.Fatalf("after rotation: %+v, %v", a.Response, a.Err)
	}
	reqs := r.ts.Requests()
	if len(reqs) != 2 || reqs[0].Secret != secretOne || reqs[1].Secret != secretTwo {
		t.Fatalf("token requests = %d, secrets one/two = %v/%v", len(reqs),
			len(reqs) > 0 && reqs[0].Secret == secretOne, len(reqs) > 1 && reqs[1].Secret == secretTwo)
	}
	sent := r.tokensSent()
	if last := sent[len(sent)-1]; r.ts.SecretOf(last) != secretTwo {
		t.Errorf("the upstream's last token was not minted with the new secret")
	}
	assertNoCredentials(t, r, map[string]string{"logs": r.logs.String()})
}
