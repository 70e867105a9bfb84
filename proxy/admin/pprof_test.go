package admin

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// pprofHandler is the admin handler with Deps.Pprof as given, a write and
// a read token, and its audit lines in logs.
func pprofHandler(t *testing.T, on bool, logs *proctest.LogBuffer) http.Handler {
	t.Helper()
	tokens := testTokens(t, admWriteToken, admReadToken)
	return New(Deps{Config: admConfig(), Tokens: tokens, Pprof: on, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
}

// TestPprof: off by default (404); on, every profiler route needs a
// write-scope token (401 without, 403 with a read token) and each request
// is audit-logged with the token's name and path; a CPU profile longer than
// maxProfileSeconds is refused.
func TestPprof(t *testing.T) {
	var logs proctest.LogBuffer
	if rec := get(t, pprofHandler(t, false, &logs), "/debug/pprof/", admWriteToken); rec.Code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ with admin.pprof off = %d, want 404", rec.Code)
	}
	h := pprofHandler(t, true, &logs)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1",
		"/debug/pprof/cmdline", "/debug/pprof/trace?seconds=1"} {
		if rec := get(t, h, path, ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without a token = %d, want 401", path, rec.Code)
		}
		if rec := get(t, h, path, admReadToken); rec.Code != http.StatusForbidden {
			t.Errorf("%s with a read token = %d, want 403", path, rec.Code)
		}
	}
	logs.Reset()
	rec := get(t, h, "/debug/pprof/", admWriteToken)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine") {
		t.Fatalf("/debug/pprof/ = %d %.200s", rec.Code, rec.Body)
	}
	if rec := get(t, h, "/debug/pprof/goroutine?debug=1", admWriteToken); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), "goroutine profile:") {
		t.Fatalf("/debug/pprof/goroutine = %d %.200s", rec.Code, rec.Body)
	}
	if rec := get(t, h, "/debug/pprof/profile?seconds=1", admWriteToken); rec.Code != http.StatusOK ||
		rec.Header().Get("Content-Type") != "application/octet-stream" || rec.Body.Len() == 0 {
		t.Fatalf("/debug/pprof/profile?seconds=1 = %d %q, %d bytes", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
	if rec := get(t, h, "/debug/pprof/profile?seconds=301", admWriteToken); rec.Code != http.StatusBadRequest {
		t.Fatalf("a 301-second profile = %d, want 400", rec.Code)
	}
	audits := logs.Audits()
	want := []struct{ path, result string }{{"/debug/pprof/", "ok"}, {"/debug/pprof/goroutine", "ok"},
		{"/debug/pprof/profile", "ok"}, {"/debug/pprof/profile", "invalid_request"}}
	if len(audits) != len(want) {
		t.Fatalf("audit lines = %v, want %d", audits, len(want))
	}
	for i, w := range want {
		if a := audits[i]; a["action"] != "pprof" || a["token"] != "ops" || a["path"] != w.path || a["result"] != w.result {
			t.Errorf("audit line %d = %v, want pprof by ops on %s: %s", i, a, w.path, w.result)
		}
	}
}

// TestPprofRefusalsAudited: a refused profiler request is audit-logged too,
// under the read token's name when one was presented.
func TestPprofRefusalsAudited(t *testing.T) {
	var logs proctest.LogBuffer
	h := pprofHandler(t, true, &logs)
	if rec := get(t, h, "/debug/pprof/heap", admReadToken); rec.Code != http.StatusForbidden {
		t.Fatalf("read token = %d", rec.Code)
	}
	lines := logs.Lines(t)
	if len(lines) != 1 {
		t.Fatalf("log lines %q, want the one audit line", logs.String())
	}
	a := lines[0]
	if a["msg"] != "audit" || a["action"] != "pprof" || a["token"] != "viewer" || a["path"] != "/debug/pprof/heap" ||
		a["result"] != "forbidden" {
		t.Fatalf("audit line = %v", a)
	}
}
