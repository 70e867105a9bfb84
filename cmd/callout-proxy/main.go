// Command callout-proxy runs the Callout Proxy: callouts from Salesforce in,
// allow-listed upstreams out, retries, circuit breakers and dead letters
// kept in Redis. See the README for configuration and operation.
//
// Usage:
//
//	callout-proxy --config FILE          run the proxy
//	callout-proxy --version              print the version
//	callout-proxy token --config FILE    print a short-lived HS256 dev JWT
package main

import (
	"context"
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

// run is the whole program: it parses args, loads the configuration, wires
// every dependency and serves until ctx ends. It is what tests call.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "token" {
		return runToken(args[1:], getenv, stdout, stderr)
	}
	opts, err := parseServeArgs(args, stderr)
	if err != nil {
		return err
	}
	if opts.version {
		fmt.Fprintln(stdout, "callout-proxy", version())
		return nil
	}
	return serve(ctx, opts.configPath, getenv, stderr)
}
