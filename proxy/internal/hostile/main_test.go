//go:build hostile

package hostile

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// proxyBinary is the callout-proxy binary of this run, set by TestMain
// before any test runs and only read afterwards.
var proxyBinary string

// TestMain builds cmd/callout-proxy once (without -race: the race
// detector's cost would distort the load and the memory the suite
// measures), unless CALLOUT_HOSTILE_BINARY names one already built, runs the
// tests and removes the binary.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "hostile: redis-server is required:", err)
		return 1
	}
	return proctest.RunWithBinary(m, "hostile", "CALLOUT_HOSTILE_BINARY", false, &proxyBinary)
}
