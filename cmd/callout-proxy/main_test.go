package main

import (
	"os"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestMain runs the end-to-end tests, which mostly wait on the proxies they
// run, more than two at a time (proctest.WaitingParallel).
func TestMain(m *testing.M) {
	proctest.WaitingParallel()
	os.Exit(m.Run())
}
