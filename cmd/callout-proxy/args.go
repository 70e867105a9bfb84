package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// usageError marks a bad command line or configuration (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u) || errors.Is(err, flag.ErrHelp)
}

type serveOptions struct {
	configPath string
	version    bool
}

// usageText is callout-proxy --help: the subcommands, then the flags.
const usageText = `Usage:
  callout-proxy --config FILE                run the proxy (SIGHUP reloads FILE)
  callout-proxy dev [--listen ADDR] [--admin-listen ADDR]
                                             run it with nothing set up: embedded store, secrets made
                                             in memory, demo upstreams; prints a token and a first curl
  callout-proxy validate --config FILE       check a configuration (and the secrets it names) without starting
  callout-proxy migrate --config FILE        bring the Redis store to this binary's layout (refused when newer)
  callout-proxy token --config FILE [flags]  print a short-lived HS256 JWT for local tests (token --help)
  callout-proxy healthcheck [--config FILE] [--url URL]
                                             ask a running proxy's /healthz; exit 0 when healthy (and,
                                             with --config, running FILE: its config fingerprint)
                                             (the container image's health check: no shell needed)
  callout-proxy version                      print the version, commit and build date
  callout-proxy help                         print this

Flags:
  --config FILE   the YAML configuration file (required to run)
  --version       print the version and exit
`

func parseServeArgs(args []string, stdout, stderr io.Writer) (serveOptions, error) {
	var o serveOptions
	fs := flag.NewFlagSet("callout-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, usageText) }
	fs.StringVar(&o.configPath, "config", "", "path to the YAML configuration file (required)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, usageError{err}
	}
	if fs.NArg() > 0 {
		return o, usageError{fmt.Errorf("unexpected argument %q (subcommands: validate, token, healthcheck, version, migrate, dev; see --help)", fs.Arg(0))}
	}
	if !o.version && o.configPath == "" {
		return o, usageError{errors.New("--config FILE is required")}
	}
	return o, nil
}

// runToken prints an HS256 JWT for the configured dev setup, so a newcomer
// can call the proxy with curl without writing code. It refuses when the
// configuration does not allow HS256.
func runToken(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("callout-proxy token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path to the YAML configuration file (required)")
	issuer := fs.String("issuer", "", "the iss claim (default: the first configured issuer)")
	subject := fs.String("subject", "dev-user", "the sub claim")
	lifetime := fs.Duration("lifetime", 15*time.Minute, "token lifetime (at most auth.max_token_lifetime)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return usageError{err}
	}
	if *path == "" {
		return usageError{errors.New("token: --config FILE is required")}
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		return usageError{err}
	}
	iss := *issuer
	if iss == "" {
		iss = cfg.Auth.Issuers[0]
	}
	secret, err := cfg.Auth.HS256Secret(iss, getenv)
	if err != nil {
		return usageError{fmt.Errorf("token: %w", err)}
	}
	if *lifetime > cfg.Auth.MaxTokenLifetime {
		return usageError{fmt.Errorf("token: --lifetime %s exceeds auth.max_token_lifetime %s",
			*lifetime, cfg.Auth.MaxTokenLifetime)}
	}
	tok, err := auth.MintHS256(secret, iss, cfg.Auth.Audience, *subject, *lifetime, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
