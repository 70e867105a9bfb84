//go:build hostile

package hostile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// mainPackage is the import path of the binary under test.
const mainPackage = "github.com/calloutproxy/callout-proxy/cmd/callout-proxy"

// proxyBinary is the callout-proxy binary of this run, set by TestMain
// before any test runs and only read afterwards.
var proxyBinary string

// TestMain builds cmd/callout-proxy once (without -race: the suite measures
// memory, which the race detector would distort), unless
// CALLOUT_HOSTILE_BINARY names one already built, and runs the tests.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "hostile: redis-server is required:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "callout-proxy-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "callout-proxy")
	if b := os.Getenv("CALLOUT_HOSTILE_BINARY"); b != "" {
		bin = b
	} else if out, err := exec.Command(goTool(), "build", "-o", bin, mainPackage).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "hostile: go build %s: %v\n%s", mainPackage, err, out)
		return 1
	}
	proxyBinary = bin
	return m.Run()
}

// goTool is the go command: from PATH, else from GOROOT.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
