package main

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// Build stamps, set at link time by deploy/build.sh and the Dockerfile:
// -ldflags "-X main.version=v1.2.3 -X main.commit=… -X main.buildDate=…".
// They are package-level variables only because -X can set nothing else;
// nothing writes them at run time. Empty: api.NewBuildInfo asks the Go
// toolchain's embedded build information instead.
var (
	version   string
	commit    string
	buildDate string
)

func (a *app) versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print calloutctl's version, commit and build date",
		Action: func(_ context.Context, c *cli.Command) error {
			asJSON, err := jsonOutput(c)
			if err != nil {
				return err
			}
			b := api.NewBuildInfo(version, commit, buildDate)
			if asJSON {
				return writeJSON(a.stdout, nil, b)
			}
			a.printf("calloutctl %s\n", b)
			return nil
		},
	}
}
