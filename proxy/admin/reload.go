package admin

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// reloadTimeout bounds one reload: reading the file, its secrets and
// certificates, and building the new parts.
const reloadTimeout = 30 * time.Second

// handleReload serves POST /admin/v1/reload, scope write
// (docs/configuration.md, "Reloading"): 200 with api.ReloadDoc when the
// configuration file's current text is in force, or 422
// reload-rejected naming every reason (the file's problems with their
// lines, the keys only a restart applies) when nothing changed. Both are
// audit-logged (action "reload").
func (s *server) handleReload(w http.ResponseWriter, r *http.Request) {
	au := audit{s: s, r: r, action: "reload"}
	token, ok := s.authorize(w, r, auth.ScopeWrite, &au)
	if !ok {
		return
	}
	au.token = token
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), reloadTimeout)
	defer cancel()
	fp, err := s.d.Reload(ctx)
	if err != nil {
		au.refused(w, problem.Wrap(problem.ReloadRejected, err.Error(), nil))
		return
	}
	au.log(slog.LevelInfo, "ok", slog.String("config", fp))
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, api.ReloadDoc{Status: "reloaded", Config: fp})
}
