//go:build fault

package fault

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

// proxyBinary is the callout-proxy binary TestMain built for this run. It
// is written once, before any test runs, and only read afterwards.
var proxyBinary string

// TestMain builds cmd/callout-proxy once (without -race: the suite is
// about faults, and the race detector's cost would distort the load),
// runs the tests and removes the binary.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "fault: redis-server is required:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "callout-proxy-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "callout-proxy")
	if b := os.Getenv("CALLOUT_FAULT_BINARY"); b != "" {
		bin = b // .ci/fault.sh built it already
	} else if out, err := exec.Command(goTool(), "build", "-o", bin, mainPackage).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "fault: go build %s: %v\n%s", mainPackage, err, out)
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
