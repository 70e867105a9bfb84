package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// Build stamps, set at link time by deploy/build.sh and the Dockerfile:
// -ldflags "-X main.version=v1.2.3 -X main.commit=… -X main.buildDate=…".
// They are package-level variables only because -X can set nothing else;
// nothing writes them at run time. Empty: buildInfo asks the Go
// toolchain's embedded build information instead.
var (
	version   string
	commit    string
	buildDate string
)

// buildInfo is the running build: its stamps, filled in from the
// toolchain's build information.
func buildInfo() api.BuildInfo { return api.NewBuildInfo(version, commit, buildDate) }

// runVersion is `callout-proxy version [--json]`.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("callout-proxy version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print it as JSON (the /healthz fields)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return usageError{err}
	}
	b := buildInfo()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(b)
	}
	_, err := fmt.Fprintln(stdout, "callout-proxy", b)
	return err
}
