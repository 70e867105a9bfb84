// Command callout-proxy runs the Callout Proxy: callouts from Salesforce in,
// allow-listed upstreams out, retries, circuit breakers and dead letters
// kept in Redis. See the README for configuration and operation.
//
// Usage:
//
//	callout-proxy --config FILE                run the proxy
//	callout-proxy dev                          run it with nothing set up: embedded store, demo upstreams
//	callout-proxy validate --config FILE       check a configuration without starting
//	callout-proxy migrate --config FILE        bring the Redis store to this binary's layout
//	callout-proxy token --config FILE          print a short-lived HS256 dev JWT
//	callout-proxy healthcheck [--config FILE]  ask a running proxy's /healthz (the image's health check)
//	callout-proxy version                      print the version, commit and build date
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "callout-proxy:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 2 for usage and configuration errors, 1 otherwise.
func exitCode(err error) int {
	if isUsage(err) {
		return 2
	}
	return 1
}

// run is the whole program: it parses args, runs a subcommand or loads the
// configuration and runs the proxy on it (serve: app.New, app.App.Run)
// until ctx ends. It is what tests call. --help (and help) print the usage on stdout and return
// nil: exit 0.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "dev":
			return runDev(ctx, args[1:], getenv, stdout, stderr)
		case "token":
			return runToken(args[1:], getenv, stdout, stderr)
		case "version":
			return runVersion(args[1:], stdout, stderr)
		case "validate":
			return runValidate(args[1:], getenv, stdout, stderr)
		case "migrate":
			return runMigrate(ctx, args[1:], getenv, stdout, stderr)
		case "healthcheck":
			return runHealthcheck(ctx, args[1:], getenv, stdout, stderr)
		case "help":
			fmt.Fprint(stdout, usageText)
			return nil
		}
	}
	opts, err := parseServeArgs(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed
	}
	if err != nil {
		return err
	}
	if opts.version {
		fmt.Fprintln(stdout, "callout-proxy", buildInfo())
		return nil
	}
	return serve(ctx, opts.configPath, getenv, stderr)
}
