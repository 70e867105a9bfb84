//go:build fault

package fault

import (
	"os"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// proxyBinary is the callout-proxy binary of this run, set by TestMain
// before any test runs and only read afterwards.
var proxyBinary string

// TestMain builds cmd/callout-proxy once (proctest.RunSuite: redis-server
// is required, no -race), unless CALLOUT_FAULT_BINARY names one already built, runs the
// tests and removes the binary.
func TestMain(m *testing.M) {
	os.Exit(proctest.RunSuite(m, "fault", "CALLOUT_FAULT_BINARY", &proxyBinary))
}
