package credentials

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

const (
	msgKept    = `"msg":"credential file unusable; keeping the previous value"`
	msgFirst   = `"msg":"credential file unusable"`
	msgChanged = `"msg":"credential file changed; using the new value"`
)

// TestWatchedSecret walks one secret file through its life: read on first
// use, not re-read within the interval, re-read after it (or when the
// clock went back), a bad value kept out with one error per change, a
// file that was never good returning its error, a rename-style update.
func TestWatchedSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktest.New(t0)
	logs := &proctest.LogBuffer{}
	parses := 0
	parse := parseSecret(path)
	w := &watched[string]{key: "endpoints.a.headers.X-Key", paths: []string{path}, maxBytes: maxSecretBytes,
		parse: func(d [][]byte) (string, error) { parses++; return parse(d) },
		now:   clock.Now, interval: time.Second, logger: slog.New(slog.NewJSONHandler(logs, nil))}
	steps := []struct {
		name    string
		write   *string // nil: leave the file; "" removes it when remove is set
		remove  bool
		at      time.Duration // clock, from t0
		want    string        // "" : want an error
		gen     uint64
		parses  int
		kept    int // msgKept lines so far
		first   int // msgFirst lines so far
		changed int // msgChanged lines so far
	}{
		{name: "missing at first", remove: true, at: 0, gen: 0, parses: 0, first: 1},
		{name: "still missing, same error", at: 2 * time.Second, gen: 0, parses: 0, first: 1},
		{name: "appears", write: ptr("v1\n"), at: 4 * time.Second, want: "v1", gen: 1, parses: 1, first: 1},
		{name: "within the interval", write: ptr("v2\n"), at: 4*time.Second + 999*time.Millisecond, want: "v1", gen: 1, parses: 1, first: 1},
		{name: "after the interval", at: 5 * time.Second, want: "v2", gen: 2, parses: 2, first: 1, changed: 1},
		{name: "unchanged: not parsed again", at: 9 * time.Second, want: "v2", gen: 2, parses: 2, first: 1, changed: 1},
		{name: "clock went back: re-read", write: ptr("v3"), at: 3 * time.Second, want: "v3", gen: 3, parses: 3, first: 1, changed: 2},
		{name: "emptied", write: ptr("\n"), at: 10 * time.Second, want: "v3", gen: 3, parses: 4, kept: 1, first: 1, changed: 2},
		{name: "still empty: no new error", at: 20 * time.Second, want: "v3", gen: 3, parses: 4, kept: 1, first: 1, changed: 2},
		{name: "removed", remove: true, at: 30 * time.Second, want: "v3", gen: 3, parses: 4, kept: 2, first: 1, changed: 2},
		{name: "control character", write: ptr("v4\x00"), at: 40 * time.Second, want: "v3", gen: 3, parses: 5, kept: 3, first: 1, changed: 2},
		{name: "good again", write: ptr("v5\r\n"), at: 50 * time.Second, want: "v5", gen: 4, parses: 6, kept: 3, first: 1, changed: 3},
	}
	for _, st := range steps {
		switch {
		case st.remove:
			_ = os.Remove(path)
		case st.write != nil:
			if err := os.WriteFile(path, []byte(*st.write), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		clock.Set(t0.Add(st.at))
		v, gen, err := w.get()
		switch {
		case st.want == "" && err == nil:
			t.Fatalf("%s: got %q, want an error", st.name, v)
		case st.want != "" && (err != nil || v != st.want):
			t.Fatalf("%s: got %q, %v; want %q", st.name, v, err, st.want)
		}
		if gen != st.gen || parses != st.parses {
			t.Fatalf("%s: generation %d, parses %d; want %d, %d", st.name, gen, parses, st.gen, st.parses)
		}
		if k, f, c := logs.Count(msgKept), logs.Count(msgFirst+","), logs.Count(msgChanged); k != st.kept || f != st.first || c != st.changed {
			t.Fatalf("%s: log lines kept/first/changed = %d/%d/%d, want %d/%d/%d:\n%s",
				st.name, k, f, c, st.kept, st.first, st.changed, logs)
		}
	}
	for _, v := range []string{"v1", "v2", "v3", "v4", "v5"} {
		if strings.Contains(logs.String(), `"`+v) {
			t.Errorf("logs carry the value %q:\n%s", v, logs)
		}
	}
}

func ptr(s string) *string { return &s }

// TestWatchedLimits: a file over the size limit is refused by name.
func TestWatchedLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, make([]byte, maxSecretBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	w := newWatched(&Options{Now: time.Now, Logger: slog.New(slog.DiscardHandler), RecheckInterval: time.Second},
		"endpoints.a.oauth2.client_secret", []string{path}, maxSecretBytes, parseSecret(path))
	if _, _, err := w.get(); err == nil || !strings.Contains(err.Error(), "larger than 65536 bytes") ||
		!strings.HasPrefix(err.Error(), "endpoints.a.oauth2.client_secret: ") {
		t.Errorf("err = %v, want the key and the size limit", err)
	}
}

// TestSecretFromEnv: an environment secret is read on every use; an unset
// one or one with a control character is a *ConfigError naming the
// variable, never the value.
func TestSecretFromEnv(t *testing.T) {
	vals := map[string]string{"GOOD": "env-secret-1", "CRLF": "env-secret\r\nX: 1"}
	o := &Options{Getenv: func(k string) string { return vals[k] }}
	tests := []struct {
		name, env, want string
	}{
		{"set", "GOOD", "env-secret-1"},
		{"unset", "NOPE", ""},
		{"control character", "CRLF", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := newSecret("endpoints.a.oauth2.client_id", config.SecretRef{Env: tt.env}, o).value()
			if tt.want != "" {
				if err != nil || v != tt.want {
					t.Fatalf("value = %q, %v", v, err)
				}
				return
			}
			if _, ok := errors.AsType[*ConfigError](err); !ok || !strings.Contains(err.Error(), tt.env) ||
				strings.Contains(err.Error(), "env-secret") {
				t.Errorf("err = %v, want a ConfigError naming %s and not the value", err, tt.env)
			}
		})
	}
}
