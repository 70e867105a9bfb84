package api

import (
	"strings"
	"testing"
)

// TestBuildInfo: link-time stamps win over the toolchain's; the one-line
// form shortens the commit to 12 characters and keeps "-dirty".
func TestBuildInfo(t *testing.T) {
	b := NewBuildInfo("v1.2.3", "0123456789abcdef0123456789abcdef01234567-dirty", "2026-03-02T09:00:00Z")
	if b.Version != "v1.2.3" || b.BuildDate != "2026-03-02T09:00:00Z" || !strings.HasPrefix(b.GoVersion, "go") {
		t.Fatalf("stamped = %+v", b)
	}
	if got := b.String(); got != "v1.2.3 (commit 0123456789ab-dirty, built 2026-03-02T09:00:00Z, "+b.GoVersion+")" {
		t.Fatalf("String = %q", got)
	}
	if u := NewBuildInfo("", "", ""); u.Version == "" {
		t.Fatalf("unstamped = %+v, want a version (the module's, or devel)", u)
	}
}
