package multiproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
)

// mainPackage is the import path of the binary under test.
const mainPackage = "github.com/calloutproxy/callout-proxy/cmd/callout-proxy"

// proxyBinary is the path of the callout-proxy binary TestMain built for
// this run, "" when no real Redis is configured (every test skips then).
// It is written once, before any test runs, and only read afterwards.
var proxyBinary string

// TestMain builds cmd/callout-proxy once for the whole run (with -race when
// this test binary has it, so the replicas are race-checked too), then runs
// the tests and removes the binary.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Getenv(redistest.EnvURL) == "" && os.Getenv(redistest.EnvRequireReal) != "1" {
		return m.Run() // every test skips: there is no Redis to share
	}
	dir, err := os.MkdirTemp("", "callout-proxy-multiproc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "multiproc:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "callout-proxy")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goTool(), append(args, mainPackage)...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "multiproc: go build %s: %v\n%s", mainPackage, err, out)
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
	root := os.Getenv("GOROOT")
	if root == "" {
		root = runtime.GOROOT()
	}
	return filepath.Join(root, "bin", "go")
}
