package multiproc

import (
	"os"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

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
	return proctest.RunWithBinary(m, "multiproc", "", raceEnabled, &proxyBinary)
}
