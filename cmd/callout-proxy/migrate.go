package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/calloutproxy/callout-proxy/proxy/app"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
)

// runMigrate is `callout-proxy migrate --config FILE`: it brings the
// configured Redis store to this binary's layout (layout.Migrate,
// keyspace cp:layout) and says what it found. A store of a newer or an
// unknown older layout is refused (exit 1), nothing written. The embedded
// store lives only inside a running proxy, which stamps it at start:
// nothing to migrate. Only the redis section's secrets need be set
// (config.LoadForStore): a migration job needs no auth key, admin token
// or endpoint credential.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	_, cfg, err := loadConfigFlag("migrate", args, config.LoadForStore, getenv, stderr)
	if cfg == nil {
		return err
	}
	if cfg.Redis.Embedded() {
		fmt.Fprintln(stdout, "redis: embedded (in memory): nothing to migrate; a proxy stamps its embedded store at start")
		return nil
	}
	rdb, closeRedis, err := app.OpenRedis(cfg.Redis, getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer closeRedis()
	from, err := layout.Migrate(ctx, rdb)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	switch from {
	case 0:
		fmt.Fprintf(stdout, "redis %s: no layout yet; stamped layout %d\n", cfg.Redis, layout.Version)
	case layout.Version:
		fmt.Fprintf(stdout, "redis %s: already at layout %d; nothing to do\n", cfg.Redis, from)
	default:
		fmt.Fprintf(stdout, "redis %s: migrated layout %d to %d\n", cfg.Redis, from, layout.Version)
	}
	return nil
}

// loadConfigFlag parses the one flag of a subcommand that reads the
// configuration (--config FILE, required) and loads it with load
// (config.Load, or config.LoadForStore for one that only opens the
// store). It returns the
// path and the configuration, or a nil configuration with the error to
// return: nil for -h (the usage was printed), a usageError (exit 2) for a
// bad flag, a missing --config or a configuration error.
func loadConfigFlag(sub string, args []string, load func(string, func(string) string) (*config.Config, error),
	getenv func(string) string, stderr io.Writer) (string, *config.Config, error) {
	fs := flag.NewFlagSet("callout-proxy "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path to the YAML configuration file (required)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return "", nil, nil
	} else if err != nil {
		return "", nil, usageError{err}
	}
	if *path == "" {
		return "", nil, usageError{errors.New(sub + ": --config FILE is required")}
	}
	cfg, err := load(*path, getenv)
	if err != nil {
		return "", nil, usageError{err}
	}
	return *path, cfg, nil
}
