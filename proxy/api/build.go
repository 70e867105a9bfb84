package api

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// BuildInfo says which build of a program is running: `callout-proxy
// version`, `calloutctl version`, the proxy's GET /healthz and its
// callout_build_info metric. Version is the module version (a release
// tag, or a pseudo-version), "devel" when unknown; Commit the VCS revision
// (with "-dirty" for a modified tree); BuildDate RFC 3339 (the commit's
// time when the build did not stamp one); GoVersion the toolchain's.
type BuildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	BuildDate string `json:"build_date,omitempty"`
	GoVersion string `json:"go_version"`
}

// NewBuildInfo returns the running program's BuildInfo: version, commit
// and date as stamped at link time (deploy/build.sh and the Dockerfile pass
// -ldflags "-X main.version=… -X main.commit=… -X main.buildDate=…"), each
// that is empty filled from what the Go toolchain embedded
// (debug.ReadBuildInfo: the module version, vcs.revision, vcs.time,
// vcs.modified).
func NewBuildInfo(version, commit, buildDate string) BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, BuildDate: buildDate, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.BuildDate == "" {
					b.BuildDate = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && commit == "" && b.Commit != "" {
			b.Commit += "-dirty"
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// String is the one-line form: "v1.2.3 (commit abc1234, built
// 2025-01-31T14:00:00Z, go1.26.0)".
func (b BuildInfo) String() string {
	s := b.Version + " ("
	if b.Commit != "" {
		c, dirty := strings.CutSuffix(b.Commit, "-dirty")
		if len(c) > 12 {
			c = c[:12]
		}
		if dirty {
			c += "-dirty"
		}
		s += "commit " + c + ", "
	}
	if b.BuildDate != "" {
		s += "built " + b.BuildDate + ", "
	}
	return s + b.GoVersion + ")"
}
